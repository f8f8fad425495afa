#include "model/knobs.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace oomguard {

bool IsKnobOrWorkloadName(const std::string& name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

std::string KnobTypeName(const KnobValue& value) {
  static constexpr const char* kNames[] = {"a boolean", "an integer", "a number", "a string"};
  return kNames[value.index()];
}

std::string FormatKnob(const KnobValue& value) {
  return std::visit([](const auto& v) { return DumpJson(nlohmann::json(v)); }, value);
}

}  // namespace oomguard
