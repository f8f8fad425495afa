// The values a scenario's variants give a workload's knobs (oomguard/workload.h), and the ones an
// in-process measurement passes (oomguard/measure.h): {"batch", int64_t{64}}, {"eval_no_grad", false}.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>

namespace oomguard {

// JSON true/false, a whole number, any other number, a string.
using KnobValue = std::variant<bool, int64_t, double, std::string>;
using Knobs = std::map<std::string, KnobValue>;

}  // namespace oomguard
