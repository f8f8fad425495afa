// The fields of a scenario whose text reaches the console and every report as it is written (summary,
// teach): read as strings, with control characters refused.
//
//   {"summary", SummaryField(&out->summary)},   // "at summary: a control character (U+001B) at byte 7; ..."
//   {"teach", TeachField(&out->teach)},         // a string, or an array of lines joined with '\n'
//
// Header-only, like json_diagnostics.h; readers return false with *error set, never throw.
#pragma once

#include <cstdio>
#include <string>

#include "scenario/json_diagnostics.h"

namespace oomguard {

// Text that reaches the console and every report as it is: control characters other than a line break
// or a tab (a terminal escape, say) are refused rather than passed through.
inline bool PlainText(const std::string& text, const JsonPath& path, std::string* error) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
      char code[8];
      std::snprintf(code, sizeof code, "U+%04X", c);
      return Fail(path,
                  std::string("a control character (") + code + ") at byte " + std::to_string(i + 1) +
                      "; write plain text (escapes would reach the console and the reports as they are)",
                  error);
    }
  }
  return true;
}

inline FieldReader SummaryField(std::string* out) {
  return [out](const OrderedJson& value, const JsonPath& path, std::string* error) {
    return StringField(out)(value, path, error) && PlainText(*out, path, error);
  };
}

inline FieldReader TeachField(std::string* out) {
  return [out](const OrderedJson& value, const JsonPath& path, std::string* error) {
    if (value.is_string()) {
      *out = value.get<std::string>();
      return PlainText(*out, path, error);
    }
    if (!value.is_array())
      return Fail(path, "expected a string or an array of strings (lines), got " + DescribeJson(value), error);
    out->clear();
    for (size_t i = 0; i < value.size(); ++i) {
      if (!value[i].is_string())
        return Fail(path.Index(static_cast<int64_t>(i)), "expected a string, got " + DescribeJson(value[i]), error);
      if (!PlainText(value[i].get<std::string>(), path.Index(static_cast<int64_t>(i)), error)) return false;
      *out += (i > 0 ? "\n" : "") + value[i].get<std::string>();
    }
    return true;
  };
}

}  // namespace oomguard
