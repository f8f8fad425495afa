// Text quoted from an input file into a message, made safe for a terminal and a report:
//
//   oomguard::ShowControlBytes("a\x1b[2Jb")           // "a\x1B[2Jb": an escape sequence shown, not run
//   oomguard::ShowControlBytes("\xc3\xa9", true)      // "\xC3\xA9": every byte outside printable ASCII
//
// Header-only; nothing here can fail.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace oomguard {

// Bytes below 0x20 and 0x7F (and, with `non_ascii`, every byte from 0x80) become \xNN; the rest is kept.
inline std::string ShowControlBytes(std::string_view text, bool non_ascii = false) {
  std::string shown;
  shown.reserve(text.size());
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F || (non_ascii && c >= 0x80)) {
      char code[8];
      std::snprintf(code, sizeof code, "\\x%02X", c);
      shown += code;
    } else {
      shown += ch;
    }
  }
  return shown;
}

}  // namespace oomguard
