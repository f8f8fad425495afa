// Check expressions: the expectations scenario files state about memory metrics, parsed once at load
// time and evaluated after a run.
//
//   CheckExpression check;
//   std::string error;
//   if (!ParseCheckExpression("pitfall.phase_peak.eval >= 3 * fixed.phase_peak.eval", /*relation_mode=*/true,
//                             &check, &error)) { ... error: "at column 12: ..." ... }
//   // evaluated after the run by EvaluateCheck (verdict/check_evaluator.h)
//
// Grammar (spaces are free between tokens):
//   expr   := side OP side                 OP is one of == != < <= > >=
//   side   := term (('+' | '-') term)*
//   term   := factor ('*' factor)*
//   factor := NUMBER[UNIT] | ref | '(' side ')'
//   ref    := METRIC                       per-variant mode: a metric of the variant being checked
//           | VARIANT '.' METRIC           relation mode: every ref names its variant
//   METRIC := IDENT ('.' IDENT)* ['[' INT ']']
// NUMBER is decimal or scientific (3, 1.5, 1e9); a number directly followed by a unit ParseByteSize
// accepts is one byte literal (12MiB is 12582912; "12 MiB" is an error). There is no division and no
// unary minus.
//
// Metrics (validated at parse time): peak, alloc_count, allocated_bytes_total, phase_peak.<phase> (phase:
// setup transfer forward backward optimizer zero_grad eval), live_after[N] (N >= 1), live_after_last,
// live_growth_per_iteration, transfers, transfer_bytes, transfers_per_step, transfer_bytes_per_step,
// retained_grad_bytes, forward_saved_bytes, param_bytes, grad_bytes, optimizer_state_bytes, and grads.
// All are bytes except the counts alloc_count, transfers and transfers_per_step; grads is a digest of
// the gradients and may only be compared with == or != to another grads ref (metric_names.h lists them).
//
// Comparisons are exact: values are doubles, which hold integer byte counts up to 2^53 exactly.
// Limits (base/input_limits.h): an expression has at most 2000 characters and 32 parentheses inside one
// another.
//
// Error policy: parsing returns false with a one-line message naming the 1-based column. Nothing here throws.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace oomguard {

namespace check_detail {
// The parsed tree, shared by the parser and evaluator in check_expression.cpp; not an interface.
enum class Unit { kPlain, kCount, kBytes, kDigest };  // plain: a number literal without a unit
struct Node {
  enum class Kind { kNumber, kRef, kAdd, kSub, kMul } kind = Kind::kNumber;
  Unit unit = Unit::kPlain;
  std::string text;     // kNumber: as written ("12MiB"); kRef: the canonical metric ("live_after[2]")
  std::string variant;  // kRef in relation mode
  double value = 0;     // kNumber
  int left = -1;        // children of kAdd, kSub, kMul
  int right = -1;
  size_t column = 0;  // 1-based, where it starts in the text
};
// Renders a side with single spaces around operators and only the parentheses the tree needs.
std::string RenderTree(const std::vector<Node>& nodes, int index, const std::function<std::string(const Node&)>& leaf);
}  // namespace check_detail

// A parsed expression. Default-constructed it is empty; only ParseCheckExpression fills it. Copyable.
class CheckExpression {
 public:
  // Canonical text: single spaces around operators, "pitfall.peak >= 3 * fixed.peak".
  const std::string& text() const { return text_; }
  bool relation_mode() const { return relation_mode_; }

 private:
  friend class CheckExpressionParser;     // check_expression.cpp
  friend class CheckExpressionEvaluator;  // verdict/check_evaluator.cpp
  friend std::vector<std::string> ReferencedVariants(const CheckExpression&);

  std::vector<check_detail::Node> nodes_;
  int left_ = -1;  // roots of the two sides
  int right_ = -1;
  std::string op_;
  std::string text_;
  bool relation_mode_ = false;
};

// Parses `text`. In relation mode refs must name a variant ("fixed.peak"); otherwise refs are bare metrics
// of the variant being checked ("peak"). On error returns false, leaves *out alone and sets *error, e.g.
// "at column 12: expected an operator (== != < <= > >=), got 'x'".
[[nodiscard]] bool ParseCheckExpression(std::string_view text, bool relation_mode, CheckExpression* out,
                                        std::string* error);

// The variants a relation names, each once, in order of appearance (empty in per-variant mode).
std::vector<std::string> ReferencedVariants(const CheckExpression& expression);

}  // namespace oomguard
