// The fields of a scenario whose text reaches the console and every report as it is written (summary,
// teach), and its file names (model.torchscript): read as strings, with control characters refused.
//
//   {"summary", SummaryField(&out->summary)},   // "at summary: a control character (U+001B) at byte 7; ..."
//   {"teach", TeachField(&out->teach)},         // a string, or an array of lines joined with '\n'
//   {"torchscript", FilePathField(&out->torchscript)},  // "at model.torchscript: a control character (U+0000) ..."
//
// Header-only, like json_diagnostics.h; readers return false with *error set, never throw.
#pragma once

#include <cstdio>
#include <string>

#include "scenario/json_diagnostics.h"

namespace oomguard {

// The first control character of `text` (a line break and a tab allowed when `lines`), as messages
// name it: "a control character (U+001B) at byte 7"; empty when there is none.
inline std::string FirstControlCharacter(const std::string& text, bool lines) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && !(lines && (c == '\n' || c == '\t'))) || c == 0x7F) {
      char code[8];
      std::snprintf(code, sizeof code, "U+%04X", c);
      return std::string("a control character (") + code + ") at byte " + std::to_string(i + 1);
    }
  }
  return "";
}

// Text that reaches the console and every report as it is: control characters other than a line break
// or a tab (a terminal escape, say) are refused rather than passed through.
inline bool PlainText(const std::string& text, const JsonPath& path, std::string* error) {
  const std::string found = FirstControlCharacter(text, /*lines=*/true);
  return found.empty() ||
         Fail(path, found + "; write plain text (escapes would reach the console and the reports as they are)", error);
}

// A file name: the operating system reads it up to a NUL, so "m.pt\u0000evil" would open m.pt; no
// control character at all is taken.
inline FieldReader FilePathField(std::string* out) {
  return [out](const OrderedJson& value, const JsonPath& path, std::string* error) {
    if (!StringField(out)(value, path, error)) return false;
    const std::string found = FirstControlCharacter(*out, /*lines=*/false);
    return found.empty() || Fail(path, found + "; a file name holds none", error);
  };
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
