#include "verdict/check_evaluator.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "base/byte_size.h"
#include "base/did_you_mean.h"

namespace oomguard {

using check_detail::Node;
using check_detail::RenderTree;
using check_detail::Unit;
using Kind = Node::Kind;

namespace {

std::string FormatNumber(double value) {
  if (std::nearbyint(value) == value && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, ec == std::errc() ? end : buffer);
}

// Bytes as FormatBytes prints them, or exactly ("12582913 bytes") when rounding would hide a difference.
std::string FormatValue(double value, Unit unit, bool exact) {
  if (unit != Unit::kBytes) return FormatNumber(value);
  if (exact || !std::isfinite(value) || std::fabs(value) >= 9.2e18) return FormatNumber(value) + " bytes";
  return FormatBytes(std::llround(value));
}

bool Compare(double a, const std::string& op, double b) {
  if (op == "==") return a == b;
  if (op == "!=") return a != b;
  if (op == "<") return a < b;
  if (op == "<=") return a <= b;
  if (op == ">") return a > b;
  return a >= b;
}

}  // namespace

class CheckExpressionEvaluator {
 public:
  CheckExpressionEvaluator(const CheckExpression& expr, const std::string& default_variant, const MetricLookup& lookup)
      : expr_(expr), default_variant_(default_variant), lookup_(lookup) {}

  CheckOutcome Evaluate() {
    CheckOutcome outcome;
    if (expr_.left_ < 0) return {false, false, "empty check expression"};
    std::vector<std::string> missing, mismatched;
    for (const Node& node : expr_.nodes_) {
      if (node.kind != Kind::kRef) continue;
      const std::string name = Qualified(node);
      if (values_.count(name) != 0) continue;
      std::optional<MetricValue> value = lookup_(node.variant.empty() ? default_variant_ : node.variant, node.text);
      if (!value) {
        missing.push_back(name);
      } else if (value->is_digest != (node.unit == Unit::kDigest)) {
        mismatched.push_back(name + (value->is_digest ? " is a digest, not a number" : " is a number, not a digest"));
      }
      values_[name] = value.value_or(MetricValue{});
    }
    if (!missing.empty() || !mismatched.empty()) {
      outcome.explanation =
          expr_.text_ + ": cannot evaluate: " +
          (missing.empty() ? JoinNames(mismatched, ", ") : "no measurement of " + JoinNames(missing, ", "));
      return outcome;
    }
    outcome.evaluable = true;
    const Node& left = expr_.nodes_[expr_.left_];
    const Node& right = expr_.nodes_[expr_.right_];
    if (left.unit == Unit::kDigest) {
      const std::string& a = values_[Qualified(left)].digest;
      const std::string& b = values_[Qualified(right)].digest;
      outcome.holds = (a == b) == (expr_.op_ == "==");
      outcome.explanation = expr_.text_ + ": " + a + " " + expr_.op_ + " " + b;
      return outcome;
    }
    const double a = Value(expr_.left_), b = Value(expr_.right_);
    outcome.holds = Compare(a, expr_.op_, b);
    const Unit shown = left.unit == Unit::kBytes || right.unit == Unit::kBytes ? Unit::kBytes : Unit::kPlain;
    const bool exact = a != b && FormatValue(a, shown, false) == FormatValue(b, shown, false);
    outcome.explanation = expr_.text_ + ": " + RenderSide(expr_.left_, a, exact) + " " + expr_.op_ + " " +
                          RenderSide(expr_.right_, b, exact);
    return outcome;
  }

 private:
  std::string Qualified(const Node& ref) const {
    return (ref.variant.empty() ? default_variant_ : ref.variant) + "." + ref.text;
  }

  double Value(int index) {
    const Node& node = expr_.nodes_[index];
    switch (node.kind) {
      case Kind::kNumber:
        return node.value;
      case Kind::kRef:
        return values_[Qualified(node)].number;
      case Kind::kAdd:
        return Value(node.left) + Value(node.right);
      case Kind::kSub:
        return Value(node.left) - Value(node.right);
      case Kind::kMul:
        return Value(node.left) * Value(node.right);
    }
    return 0;
  }

  // The side with values substituted; a compound side, or a byte literal shown exactly, gets its total.
  std::string RenderSide(int index, double total, bool exact) {
    const Node& root = expr_.nodes_[index];
    std::string text = RenderTree(expr_.nodes_, index, [&](const Node& leaf) {
      return leaf.kind == Kind::kNumber ? leaf.text : FormatValue(values_[Qualified(leaf)].number, leaf.unit, exact);
    });
    const bool compound = root.kind != Kind::kNumber && root.kind != Kind::kRef;
    if (compound || (exact && root.kind == Kind::kNumber && root.unit == Unit::kBytes)) {
      text += " (" + FormatValue(total, root.unit, exact) + ")";
    }
    return text;
  }

  const CheckExpression& expr_;
  const std::string& default_variant_;
  const MetricLookup& lookup_;
  std::map<std::string, MetricValue> values_;  // by qualified name
};

CheckOutcome EvaluateCheck(const CheckExpression& expression, const std::string& default_variant,
                           const MetricLookup& lookup) {
  return CheckExpressionEvaluator(expression, default_variant, lookup).Evaluate();
}

}  // namespace oomguard
