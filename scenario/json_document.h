// Parsing a JSON document written by people: comments allowed, syntax errors located by line and
// column, duplicate keys rejected (nlohmann would silently keep the last value).
//
//   OrderedJson root;
//   if (!ParseJsonDocument(text, "scenarios/a.json", &root, &error)) {
//     // error: "scenarios/a.json:12:5: JSON syntax error: trailing comma before '}' (JSON allows none)"
//     //        "scenarios/a.json: at loop: duplicate key \"iterations\""
//   }
//
// Error policy: returns false with one line in *error; never throws. Header-only.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/input_limits.h"
#include "base/printable.h"
#include "scenario/json_diagnostics.h"

namespace oomguard {
namespace json_document {

using Json = OrderedJson;

// Records the first key an object holds twice; nlohmann would silently keep the last value.
class DuplicateKeyFinder {
 public:
  bool OnEvent(nlohmann::detail::parse_event_t event, const Json& parsed) {
    using Event = nlohmann::detail::parse_event_t;
    if (event == Event::object_start || event == Event::array_start || event == Event::value) {
      if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
    }
    if (event == Event::object_start || event == Event::array_start) {
      Frame frame;
      frame.array = event == Event::array_start;
      stack_.push_back(std::move(frame));
    }
    if (event == Event::object_end || event == Event::array_end) stack_.pop_back();
    if (event == Event::key) {
      Frame& object = stack_.back();
      object.key = parsed.get<std::string>();
      if (!object.keys.insert(object.key).second && first_.empty()) {
        JsonPath path;
        for (size_t i = 0; i + 1 < stack_.size(); ++i) {
          path = stack_[i].array ? path.Index(stack_[i].index) : path.Key(stack_[i].key);
        }
        first_ = "at " + path.ToString() + ": duplicate key " + Quoted(object.key);
      }
    }
    return true;
  }
  const std::string& first() const { return first_; }

 private:
  struct Frame {
    bool array = false;
    int64_t index = -1;  // arrays: the element being read
    std::string key;     // objects: the key being read
    std::set<std::string> keys;
  };
  std::vector<Frame> stack_;
  std::string first_;
};

// Thrown by the parse callback to stop at the first array or object past limits::kMaxJsonDepth.
struct TooDeep {};

// Counts the characters the parser has consumed, so that errors nlohmann reports without a position
// (a number out of range, the depth limit) get a line and column too.
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  CountingIterator(const char* at, const char* begin, size_t* consumed) : at_(at), begin_(begin), consumed_(consumed) {}
  reference operator*() const { return *at_; }
  CountingIterator& operator++() {
    ++at_;
    *consumed_ = static_cast<size_t>(at_ - begin_);
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const CountingIterator& other) const { return at_ == other.at_; }
  bool operator!=(const CountingIterator& other) const { return at_ != other.at_; }

 private:
  const char* at_;
  const char* begin_;
  size_t* consumed_;
};

// `what` is nlohmann's message; `byte` counts the characters read, the last of which is where the
// parser stopped.
inline std::string SyntaxError(const std::string& text, const std::string& label, std::string what, size_t byte) {
  const std::string marker = "syntax error while parsing ";
  if (size_t at = what.find(marker); at != std::string::npos) what = what.substr(at + marker.size());
  if (size_t dash = what.find(" - "); dash != std::string::npos) what = what.substr(dash + 3);
  if (size_t read = what.find("; last read: '"); read != std::string::npos) {
    const size_t end = what.find("'; expected ", read + 14);
    what.erase(read, end == std::string::npos ? std::string::npos : end + 1 - read);
  }
  // e.byte counts the characters read; the last one is where the parser stopped. Whitespace (the end of
  // a line, the end of the file) is never the culprit: step back to what precedes it.
  size_t pos = std::min<size_t>(byte, text.size());
  pos = pos > 0 ? pos - 1 : 0;
  auto space = [&](size_t i) { return std::isspace(static_cast<unsigned char>(text[i])) != 0; };
  while (pos > 0 && space(pos)) --pos;
  auto word_char = [&](size_t i) { return !space(i) && std::strchr(",:[]{}", text[i]) == nullptr; };
  auto number_char = [&](size_t i) { return std::strchr("0123456789.eE+-", text[i]) != nullptr; };
  const std::string overflow = "number overflow parsing '";
  if (pos < text.size() && text[pos] == '\0' && what.find("end of input") != std::string::npos) {
    // nlohmann takes a NUL byte for the end of the text.
    what = "a NUL byte (0x00), which JSON does not allow outside a string";
  } else if (size_t at = what.find(overflow); at != std::string::npos) {
    // The parser has read one character past the number: step back to its first digit.
    while (pos > 0 && !number_char(pos)) --pos;
    while (pos > 0 && number_char(pos - 1)) --pos;
    size_t end = pos;
    while (end < text.size() && number_char(end)) ++end;
    what = "number " + text.substr(pos, end - pos) + " is out of range (a JSON number here must fit a double, " +
           "at most about 1.8e308)";
  } else if (what.rfind("invalid literal", 0) == 0 && pos < text.size()) {
    while (pos > 0 && word_char(pos - 1)) --pos;
    size_t end = pos;
    while (end < text.size() && word_char(end)) ++end;
    // As written, but with control bytes shown as \xNN: it goes to a terminal.
    const std::string literal = ShowControlBytes(std::string_view(text).substr(pos, std::min<size_t>(end - pos, 80)));
    what = "invalid literal " + literal + " (strings need double quotes; the literals are true, false and null)";
  } else if (what.rfind("unexpected string literal", 0) == 0 || what.rfind("unexpected number literal", 0) == 0) {
    // Point at the start of the literal, which usually follows a missing comma.
    const bool string = what[11] == 's';
    auto escaped = [&](size_t i) {
      size_t slashes = 0;
      while (i > slashes && text[i - 1 - slashes] == '\\') ++slashes;
      return slashes % 2 == 1;
    };
    if (string) {
      while (pos > 0 && !(text[pos - 1] == '"' && !escaped(pos - 1))) --pos;
      if (pos > 0) --pos;
    } else {
      while (pos > 0 && number_char(pos - 1)) --pos;
    }
    if (what.find("expected '}'") != std::string::npos || what.find("expected ']'") != std::string::npos) {
      what += " (a comma missing before it?)";
    }
  } else if (pos < text.size() && (text[pos] == '}' || text[pos] == ']')) {
    size_t before = pos;
    while (before > 0 && space(before - 1)) --before;
    if (before > 0 && text[before - 1] == ',') {
      what = std::string("trailing comma before '") + text[pos] + "' (JSON allows none)";
      pos = before - 1;
    }
  }
  size_t line = 1, column = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {  // count UTF-8 characters, not bytes
      ++column;
    }
  }
  return label + ":" + std::to_string(line) + ":" + std::to_string(column) + ": JSON syntax error: " + what;
}

}  // namespace json_document

// Parses `text` (with // and /* */ comments) into *out, keeping keys in file order. `label` names the
// text in messages: "LABEL:LINE:COL: JSON syntax error: <what>" (columns count UTF-8 characters, from 1),
// or "LABEL: at PATH: duplicate key \"k\"" for the first key an object holds twice.
[[nodiscard]] inline bool ParseJsonDocument(const std::string& text, const std::string& label, OrderedJson* out,
                                            std::string* error) {
  json_document::DuplicateKeyFinder duplicates;
  size_t consumed = 0;
  const json_document::CountingIterator begin(text.data(), text.data(), &consumed);
  const json_document::CountingIterator end(text.data() + text.size(), text.data(), &consumed);
  try {
    *out = OrderedJson::parse(
        begin, end,
        [&](int depth, nlohmann::detail::parse_event_t event, OrderedJson& parsed) {
          using Event = nlohmann::detail::parse_event_t;
          if ((event == Event::object_start || event == Event::array_start) && depth >= limits::kMaxJsonDepth) {
            throw json_document::TooDeep{};
          }
          return duplicates.OnEvent(event, parsed);
        },
        /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json_document::TooDeep&) {
    *error = json_document::SyntaxError(text, label,
                                        "arrays and objects nested more than " + std::to_string(limits::kMaxJsonDepth) +
                                            " deep (the limit for JSON documents)",
                                        consumed);
    return false;
  } catch (const nlohmann::json::parse_error& e) {
    *error = json_document::SyntaxError(text, label, e.what(), e.byte);
    return false;
  } catch (const nlohmann::json::exception& e) {  // out_of_range.406: a number beyond a double
    *error = json_document::SyntaxError(text, label, e.what(), consumed);
    return false;
  }
  if (!duplicates.first().empty()) {
    *error = label + ": " + duplicates.first();
    return false;
  }
  return true;
}

}  // namespace oomguard
