// Escaping for each markup the writers emit, one function per language: what a scenario or variant
// name, a path or an error message must become to render as itself. Tested with `bad&name<"x">` in
// every writer's golden file.
//
//   out += "<td>" + HtmlEscape(name) + "</td>";
//   out += "<testcase name=\"" + XmlEscape(name, /*attribute=*/true) + "\">";
//   out += "| " + MarkdownText(name) + " |";
#pragma once

#include <string>
#include <string_view>

namespace oomguard {

// & < > " ' as entities, for HTML and SVG text and double- or single-quoted attribute values; control
// characters other than tab and line breaks (a terminal escape in an error message) as U+FFFD.
std::string HtmlEscape(std::string_view text);

// XML 1.0 element text, or a double-quoted attribute (where tabs and line breaks must be character
// references to survive attribute-value normalisation). Malformed UTF-8 and characters XML cannot
// carry become U+FFFD.
std::string XmlEscape(std::string_view text, bool attribute = false);

// Text that renders as itself in a GitHub table cell or list item: markup characters escaped, control
// characters as spaces.
std::string MarkdownText(std::string_view text);

}  // namespace oomguard
