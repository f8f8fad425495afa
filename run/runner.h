// The runner: scenario files x variants, each variant measured in a child process of its own, then
// judged against the scenario's expectations.
//
//   oomguard::RunResults report;
//   std::string error;
//   if (!oomguard::RunScenarios(options, "/proc/self/exe", on_scenario_done, &report, &error)) { exit 2 }
//
// Isolation: every variant runs as `SELF __measure ...` with a timeout; a child that crashes, hangs
// or prints garbage makes that variant UNRESOLVED or TIMEOUT and the run goes on. Results do not
// depend on --jobs: each child starts from a fresh process, and results are kept in catalog order.
// Error policy: RunScenarios returns false only for usage errors (a path that does not exist, a bad
// --card/--cap/--inject); everything a scenario does wrong is a result.
#pragma once

#include <functional>
#include <string>

#include "run/run_options.h"
#include "model/run_results.h"

namespace oomguard {

using ScenarioDone = std::function<void(const ScenarioResult&)>;

[[nodiscard]] bool RunScenarios(const RunOptions& options, const std::string& self_exe, const ScenarioDone& on_done,
                                RunResults* report, std::string* error);

// The child's side: measures one variant and writes its measurement JSON to out_path. Returns an exit
// code (0 when the measurement was written, whatever its outcome).
int MeasureInChild(const RunOptions& options, const std::string& scenario_file, const std::string& variant,
                   const std::string& out_path, std::ostream& err);

}  // namespace oomguard
