#include "reports/escape.h"

#include <cstdint>

namespace oomguard {
namespace {

constexpr uint32_t kReplacement = 0xFFFD;

// Decodes the UTF-8 sequence at s[*i] and advances past it; a malformed, overlong or surrogate sequence
// yields U+FFFD and advances one byte.
uint32_t NextCodePoint(std::string_view s, size_t* i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char first = byte(*i);
  if (first < 0x80) return s[(*i)++];
  size_t length = 0;
  uint32_t cp = 0;
  if (first >= 0xC2 && first <= 0xDF) {
    length = 2;
    cp = first & 0x1F;
  } else if (first >= 0xE0 && first <= 0xEF) {
    length = 3;
    cp = first & 0x0F;
  } else if (first >= 0xF0 && first <= 0xF4) {
    length = 4;
    cp = first & 0x07;
  }
  if (length == 0 || *i + length > s.size()) return ++*i, kReplacement;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(*i + k) & 0xC0) != 0x80) return ++*i, kReplacement;
    cp = (cp << 6) | (byte(*i + k) & 0x3F);
  }
  constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kSmallest[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return ++*i, kReplacement;
  *i += length;
  return cp;
}

// XML 1.0's Char production.
bool IsXmlChar(uint32_t cp) {
  return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) || (cp >= 0xE000 && cp <= 0xFFFD) ||
         (cp >= 0x10000 && cp <= 0x10FFFF);
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    const std::string_view entity =
        c == '&'    ? "&amp;"
        : c == '<'  ? "&lt;"
        : c == '>'  ? "&gt;"
        : c == '"'  ? "&quot;"
        : c == '\'' ? "&#39;"
        // C0 controls other than whitespace are not allowed in HTML text
        : (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7F
            ? "\xEF\xBF\xBD"
            : std::string_view(&c, 1);
    out += entity;
  }
  return out;
}

// Escapes for element text, or for a double-quoted attribute (where tabs and line breaks must be character
// references to survive attribute-value normalisation).
std::string XmlEscape(std::string_view s, bool attribute) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const uint32_t cp = NextCodePoint(s, &i);
    if (!IsXmlChar(cp) || cp == kReplacement) {
      out += "\xEF\xBF\xBD";  // U+FFFD, for itself or for what XML cannot carry
      continue;
    }
    switch (cp) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\r':
        out += "&#13;";
        break;
      case '\t':
        out += attribute ? "&#9;" : "\t";
        break;
      case '\n':
        out += attribute ? "&#10;" : "\n";
        break;
      default:
        out.append(s.substr(start, i - start));
    }
  }
  return out;
}

std::string MarkdownText(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '|':
        out += "\\|";
        break;
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '~':
      case '$':  // GitHub renders $...$ as math
        out += '\\';
        out += ch;
        break;
      default:
        out += (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F) ? ' ' : ch;
    }
  }
  return out;
}

}  // namespace oomguard
