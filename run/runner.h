// The runner: plans a run (run/plan.h), measures every variant of each scenario that runs in a child
// process of its own (run/child_protocol.h), gathers the evidence, and has the verdict judge it.
//
//   oomguard::RunResults report;
//   std::string error;
//   if (!oomguard::RunScenarios(options, "/proc/self/exe", on_scenario_done, &report, &error)) { exit 2 }
//
// Isolation: every variant runs as `SELF __measure ...` with a timeout; a child that crashes, hangs
// or prints garbage makes that variant UNRESOLVED or TIMEOUT and the run goes on. Results do not
// depend on --jobs: each child starts from a fresh process, and results are kept in catalog order.
// on_done is called once per scenario in report.scenarios, as soon as it is judged (those that do not
// run first); never for the SKIPPED ones (report.skipped). A sharded run (options.shard) plans, runs and
// reports only its shard's files; report.shard says how many of the run's it took.
// Error policy: RunScenarios returns false only for usage errors (a path that does not exist, a bad
// --card/--cap/--inject/--shard, a --snapshot-dir that cannot be made); everything a scenario does
// wrong is a result.
#pragma once

#include <functional>
#include <string>

#include "model/run_results.h"
#include "run/run_options.h"

namespace oomguard {

using ScenarioDone = std::function<void(const ScenarioResult&)>;

[[nodiscard]] bool RunScenarios(const RunOptions& options, const std::string& self_exe, const ScenarioDone& on_done,
                                RunResults* report, std::string* error);

}  // namespace oomguard
