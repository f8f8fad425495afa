// JSON text out of a nlohmann value, for every file and message oomguard writes. Strings from the
// outside (file names, excerpts of a file that is not UTF-8) may hold invalid UTF-8, on which nlohmann's
// dump() throws: here such bytes become U+FFFD instead, so a strange name can never abort a report.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace oomguard {

// indent -1: one line; otherwise that many spaces per level.
template <typename Json>
std::string DumpJson(const Json& value, int indent = -1) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace oomguard
