// Knobs: the named values a scenario's variants set for a registered workload (oomguard/workload.h),
// which reads them through its context: {"batch": 64, "eval_no_grad": false, "lr": 1e-3, "mode": "a"}.
//
//   KnobValue v = int64_t{64};
//   KnobTypeName(v);   // "an integer"
//   FormatKnob(v);     // "64"
#pragma once

#include <string>

#include "oomguard/knobs.h"  // KnobValue and Knobs: the public API's types

namespace oomguard {

// A knob's or a workload's name, as C++ and command lines take it: [A-Za-z_][A-Za-z0-9_.-]*
// ("batch", "mlp_adam", "lr.max").
bool IsKnobOrWorkloadName(const std::string& name);

// "a boolean", "an integer", "a number", "a string": how error messages name a knob's type.
std::string KnobTypeName(const KnobValue& value);

// As JSON writes it: true, 64, 0.001, "mode".
std::string FormatKnob(const KnobValue& value);

}  // namespace oomguard
