#include "scenario/check_expression.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>

#include "base/byte_size.h"
#include "base/did_you_mean.h"
#include "base/input_limits.h"
#include "base/printable.h"
#include "model/metric_names.h"

namespace oomguard {
namespace {

using check_detail::Node;
using check_detail::Unit;
using Kind = Node::Kind;

constexpr const char* kDigestExample = "e.g. preserved.grads == reference.grads";
constexpr const char* kNoDivision =
    "there is no division in check expressions; multiply the other side instead (a >= 2 * b, not a / b >= 2)";

bool IsComparison(const std::string& op) {
  return op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=";
}

struct Token {
  enum class Type { kNumber, kIdent, kSymbol, kEnd } type = Type::kEnd;
  std::string text;
  size_t column = 0;
  double value = 0;
  bool bytes = false;  // a number with a unit
  std::string error;   // a malformed number, reported when the parser reaches it
};

std::vector<Token> Tokenize(std::string_view text) {
  std::vector<Token> tokens;
  auto is_digit = [&](size_t i) { return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); };
  auto is_alpha = [&](size_t i) { return i < text.size() && std::isalpha(static_cast<unsigned char>(text[i])); };
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    Token token;
    token.column = i + 1;
    if (c == ' ' || c == '\t') {
      ++i;
      continue;
    }
    const size_t start = i;
    if (is_digit(i) || (c == '.' && is_digit(i + 1))) {
      token.type = Token::Type::kNumber;
      while (is_digit(i)) ++i;
      if (i < text.size() && text[i] == '.') {
        ++i;
        while (is_digit(i)) ++i;
      }
      if (i < text.size() && (text[i] == 'e' || text[i] == 'E') &&
          (is_digit(i + 1) || (i + 1 < text.size() && (text[i + 1] == '+' || text[i + 1] == '-') && is_digit(i + 2)))) {
        i += 2;
        while (is_digit(i)) ++i;
      }
      const size_t unit_start = i;
      while (is_alpha(i)) ++i;
      token.text = std::string(text.substr(start, i - start));
      if (i > unit_start) {
        int64_t bytes = 0;
        token.bytes = true;
        if (ParseByteSize(token.text, &bytes, &token.error)) token.value = static_cast<double>(bytes);
      } else {
        auto [end, ec] = std::from_chars(token.text.data(), token.text.data() + token.text.size(), token.value);
        if (ec != std::errc() || end != token.text.data() + token.text.size()) {
          token.error = "invalid number '" + token.text + "'";
        }
      }
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      token.type = Token::Type::kIdent;
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
      token.text = std::string(text.substr(start, i - start));
    } else {
      token.type = Token::Type::kSymbol;
      const bool two = (c == '=' || c == '!' || c == '<' || c == '>') && i + 1 < text.size() && text[i + 1] == '=';
      i += two ? 2 : 1;
      // A UTF-8 character is one token: its lead byte and the continuation bytes after it.
      if (static_cast<unsigned char>(c) >= 0xC0) {
        while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) ++i;
      }
      token.text = std::string(text.substr(start, i - start));
    }
    tokens.push_back(std::move(token));
  }
  Token end;
  end.column = text.size() + 1;
  tokens.push_back(end);
  return tokens;
}

// Quotes a token; a control byte or one outside ASCII (which the grammar never has) shows as \xNN, so
// a newline or a broken UTF-8 character never reaches the message as it is. The typographic operators
// a word processor writes are named, with what to write instead.
std::string Describe(const Token& token) {
  if (token.type == Token::Type::kEnd) return "end of expression";
  static const std::map<std::string, std::string> kTypographic = {{"\u2264", "<="}, {"\u2265", ">="}, {"\u2260", "!="},
                                                                  {"\u00D7", "*"},  {"\u2212", "-"},  {"\u2013", "-"}};
  if (auto it = kTypographic.find(token.text); it != kTypographic.end()) {
    return "'" + token.text + "' (write " + it->second + ")";
  }
  return "'" + ShowControlBytes(token.text, true) + "'";
}

}  // namespace

namespace check_detail {

// Renders a side with single spaces around operators and only the parentheses the tree needs.
std::string RenderTree(const std::vector<Node>& nodes, int index, const std::function<std::string(const Node&)>& leaf) {
  const Node& node = nodes[index];
  if (node.kind == Kind::kNumber || node.kind == Kind::kRef) return leaf(node);
  auto additive = [&](int child) { return nodes[child].kind == Kind::kAdd || nodes[child].kind == Kind::kSub; };
  auto child = [&](int child, bool parens) {
    const std::string text = RenderTree(nodes, child, leaf);
    return parens ? "(" + text + ")" : text;
  };
  const bool mul = node.kind == Kind::kMul;
  const char* op = mul ? " * " : node.kind == Kind::kAdd ? " + " : " - ";
  return child(node.left, mul && additive(node.left)) + op +
         child(node.right, (mul || node.kind == Kind::kSub) && additive(node.right));
}

}  // namespace check_detail

class CheckExpressionParser {
 public:
  CheckExpressionParser(std::string_view text, bool relation_mode, std::string* error)
      : tokens_(Tokenize(text.substr(0, std::min<size_t>(text.size(), limits::kMaxCheckExpressionChars + 1)))),
        text_size_(text.size()),
        error_(error) {
    expr_.relation_mode_ = relation_mode;
  }

  bool Parse(CheckExpression* out) {
    if (text_size_ > static_cast<size_t>(limits::kMaxCheckExpressionChars)) {
      return Fail(static_cast<size_t>(limits::kMaxCheckExpressionChars) + 1,
                  "longer than " + std::to_string(limits::kMaxCheckExpressionChars) +
                      " characters (the limit for one check expression; split it into several checks)");
    }
    if (!ParseSide(&expr_.left_)) return false;
    if (Peek().type != Token::Type::kSymbol || !IsComparison(Peek().text)) {
      return Unexpected("expected an operator (== != < <= > >=), got " + Describe(Peek()) + UnitHint());
    }
    const Token op = Next();
    expr_.op_ = op.text;
    if (!ParseSide(&expr_.right_)) return false;
    if (Peek().type != Token::Type::kEnd) {
      return Unexpected("expected end of expression, got " + Describe(Peek()) + UnitHint());
    }
    const Node& left = expr_.nodes_[expr_.left_];
    const Node& right = expr_.nodes_[expr_.right_];
    const bool left_digest = left.unit == Unit::kDigest, right_digest = right.unit == Unit::kDigest;
    if (left_digest != right_digest) {
      return Fail((left_digest ? left : right).column,
                  "grads is a digest of the gradients: it can only be compared with another grads (" +
                      std::string(kDigestExample) + ")");
    }
    if (left_digest && op.text != "==" && op.text != "!=") {
      return Fail(op.column, "grads can only be compared with == or !=, not " + op.text);
    }
    expr_.text_ = Render(expr_.left_) + " " + expr_.op_ + " " + Render(expr_.right_);
    *out = std::move(expr_);
    return true;
  }

 private:
  const Token& Peek() const { return tokens_[pos_]; }
  const Token& Next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool PeekSymbol(const char* symbol) const { return Peek().type == Token::Type::kSymbol && Peek().text == symbol; }
  bool Fail(size_t column, const std::string& what) {
    *error_ = "at column " + std::to_string(column) + ": " + what;
    return false;
  }
  // Fails at the next token with `what`, unless that token is a '/': then says there is no division.
  bool Unexpected(const std::string& what) { return Fail(Peek().column, PeekSymbol("/") ? kNoDivision : what); }
  // "12 MiB": a number, then a word that would have made a size without the space.
  std::string UnitHint() const {
    int64_t bytes = 0;
    std::string ignored;
    if (pos_ == 0 || Peek().type != Token::Type::kIdent || tokens_[pos_ - 1].type != Token::Type::kNumber ||
        !ParseByteSize(tokens_[pos_ - 1].text + Peek().text, &bytes, &ignored)) {
      return "";
    }
    return " (write a size without a space: " + tokens_[pos_ - 1].text + Peek().text + ")";
  }

  int AddNode(Node node) {
    expr_.nodes_.push_back(std::move(node));
    return static_cast<int>(expr_.nodes_.size()) - 1;
  }

  bool Combine(Kind kind, int left, int right, int* node) {
    for (int child : {left, right}) {
      if (expr_.nodes_[child].unit == Unit::kDigest) {
        return Fail(expr_.nodes_[child].column,
                    "grads is a digest of the gradients: it cannot take part in arithmetic, only in == or != with "
                    "another grads (" +
                        std::string(kDigestExample) + ")");
      }
    }
    Node combined;
    combined.kind = kind;
    combined.left = left;
    combined.right = right;
    combined.column = expr_.nodes_[left].column;
    const Unit a = expr_.nodes_[left].unit, b = expr_.nodes_[right].unit;
    combined.unit = (a == Unit::kBytes || b == Unit::kBytes)   ? Unit::kBytes
                    : (a == Unit::kCount || b == Unit::kCount) ? Unit::kCount
                                                               : Unit::kPlain;
    *node = AddNode(std::move(combined));
    return true;
  }

  bool ParseSide(int* node) {
    if (!ParseTerm(node)) return false;
    while (PeekSymbol("+") || PeekSymbol("-")) {
      const Kind kind = Next().text == "+" ? Kind::kAdd : Kind::kSub;
      int right = -1;
      if (!ParseTerm(&right) || !Combine(kind, *node, right, node)) return false;
    }
    return true;
  }

  bool ParseTerm(int* node) {
    if (!ParseFactor(node)) return false;
    while (PeekSymbol("*")) {
      Next();
      int right = -1;
      if (!ParseFactor(&right) || !Combine(Kind::kMul, *node, right, node)) return false;
    }
    return true;
  }

  bool ParseFactor(int* node) {
    const Token& token = Peek();
    if (token.type == Token::Type::kNumber) {
      if (!token.error.empty()) return Fail(token.column, token.error);
      Node number;
      number.kind = Kind::kNumber;
      number.unit = token.bytes ? Unit::kBytes : Unit::kPlain;
      number.text = token.text;
      number.value = token.value;
      number.column = token.column;
      Next();
      *node = AddNode(std::move(number));
      return true;
    }
    if (token.type == Token::Type::kIdent) return ParseRef(node);
    if (PeekSymbol("(")) {
      if (nesting_ == limits::kMaxCheckNesting) {
        return Fail(Peek().column, "parentheses nested more than " + std::to_string(limits::kMaxCheckNesting) +
                                       " deep (the limit for check expressions)");
      }
      const size_t open = Next().column;
      ++nesting_;
      const bool parsed = ParseSide(node);
      --nesting_;
      if (!parsed) return false;
      if (!PeekSymbol(")")) {
        return Unexpected("expected ')' to close the '(' at column " + std::to_string(open) + ", got " +
                          Describe(Peek()));
      }
      Next();
      return true;
    }
    return Unexpected("expected a number, a metric or '(', got " + Describe(token));
  }

  bool ParseRef(int* node) {
    Node ref;
    ref.kind = Kind::kRef;
    ref.column = Peek().column;
    if (expr_.relation_mode_) {
      ref.variant = Next().text;
      if (!PeekSymbol(".")) {
        return Unexpected("expected '.' and a metric after variant '" + ref.variant +
                          "' (relations name VARIANT.METRIC, e.g. fixed.peak), got " + Describe(Peek()));
      }
      Next();
    }
    const size_t metric_column = Peek().column;
    std::string name;
    do {
      if (!name.empty()) name += Next().text;  // the '.'
      if (Peek().type != Token::Type::kIdent) {
        return Fail(Peek().column, "expected a metric name after '" + (ref.variant.empty() ? "" : ref.variant + ".") +
                                       name + "', got " + Describe(Peek()));
      }
      name += Next().text;
    } while (PeekSymbol("."));
    bool has_index = false;
    int64_t index = 0;
    size_t index_column = 0;
    if (PeekSymbol("[")) {
      Next();
      const Token& number = Peek();
      if (number.type != Token::Type::kNumber || number.bytes || !number.error.empty() ||
          number.text.find_first_not_of("0123456789") != std::string::npos || number.value > 1e9) {
        return Fail(number.column, "expected an iteration number (an integer >= 1) after '[', got " + Describe(number));
      }
      has_index = true;
      index = static_cast<int64_t>(number.value);
      index_column = Next().column;
      if (!PeekSymbol("]")) return Unexpected("expected ']', got " + Describe(Peek()));
      Next();
    }
    std::string error;
    MetricKind kind = MetricKind::kBytes;
    if (!ValidateMetricName(name, has_index, index, !expr_.relation_mode_, &kind, &error)) {
      return Fail(has_index && index < 1 && error.find("iterations count from 1") != std::string::npos ? index_column
                                                                                                       : metric_column,
                  error);
    }
    ref.unit = kind == MetricKind::kBytes ? Unit::kBytes : kind == MetricKind::kCount ? Unit::kCount : Unit::kDigest;
    ref.text = has_index ? name + "[" + std::to_string(index) + "]" : name;
    *node = AddNode(std::move(ref));
    return true;
  }

  std::string Render(int index) const {
    return RenderTree(expr_.nodes_, index, [](const Node& leaf) {
      return leaf.kind == Kind::kNumber || leaf.variant.empty() ? leaf.text : leaf.variant + "." + leaf.text;
    });
  }

  std::vector<Token> tokens_;
  size_t text_size_;
  size_t pos_ = 0;
  int nesting_ = 0;  // '(' open around the factor being parsed
  std::string* error_;
  CheckExpression expr_;
};

bool ParseCheckExpression(std::string_view text, bool relation_mode, CheckExpression* out, std::string* error) {
  return CheckExpressionParser(text, relation_mode, error).Parse(out);
}

std::vector<std::string> ReferencedVariants(const CheckExpression& expression) {
  std::vector<std::string> variants;
  for (const check_detail::Node& node : expression.nodes_) {
    if (node.kind != Kind::kRef || node.variant.empty()) continue;
    bool seen = false;
    for (const std::string& v : variants) seen = seen || v == node.variant;
    if (!seen) variants.push_back(node.variant);
  }
  return variants;
}

}  // namespace oomguard
