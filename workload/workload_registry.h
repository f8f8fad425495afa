// The registered workloads (oomguard/workload.h's RegisterWorkload and OOMGUARD_WORKLOAD), looked up
// by name when a scenario names one.
//
//   if (const oomguard::WorkloadFunction* f = oomguard::FindWorkload("mlp_adam")) { ... }
//   std::string why;
//   if (!oomguard::WorkloadsRegistered(scenario, &why)) { ... "workload 'x' is not registered ..." }
//
// Registration happens during static initialisation and lookups later, from any thread.
#pragma once

#include <string>

#include "model/scenario.h"
#include "oomguard/workload.h"

namespace oomguard {

// The function registered under `name`; null when none is.
const WorkloadFunction* FindWorkload(const std::string& name);

// Whether every workload the scenario's variants name is registered in this program; else false
// with "workload 'mlp_adm' is not registered in this program; did you mean 'mlp_adam'? (registered:
// mlp_adam)" or "... (no workloads are registered: the scenario needs the program that registers
// it, not the oomguard tool)".
[[nodiscard]] bool WorkloadsRegistered(const Scenario& scenario, std::string* error);

}  // namespace oomguard
