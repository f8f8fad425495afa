// The plan of a run: which scenario files run, and for each of the others why not. Pure of
// spawning: it finds and loads the files, and decides nothing that needs a measurement.
//
//   oomguard::RunPlan plan;
//   std::string error;
//   if (!oomguard::PlanRun(options, "cpu", available, &plan, &error)) { usage error }
//   for (const PlannedScenario& p : plan.scenarios) {
//     if (p.runs) { ... measure p.scenario's variants, judge them into p.result ... }
//   }
//
// Per file, in catalog order, the first rule that applies decides:
//   1. a results file of `oomguard run --json` found in a scanned folder is not a scenario: left out
//      with a note ("FILE: a results file of `oomguard run --json`, not a scenario: left out"), so a
//      scenario a results file replaced does not drop out unseen (one named on the command line is
//      loaded, and fails to);
//   2. a file of another shard (--shard INDEX/COUNT, or GoogleTest's variables with
//      options.gtest_sharding): left out of the plan. The files left after rule 1 are dealt round-robin,
//      position k (0-based) to shard (k mod COUNT) + 1, whether they load or not, so a shard's part does
//      not depend on --filter or on what the files hold. The file is still loaded for its name, so rule 5
//      sees the names of every shard and each shard judges a duplicate as the whole run would;
//   3. a name that --filter does not match (a file that does not load goes by its stem), or with
//      --filter SCENARIO/VARIANT a scenario none of whose variants VARIANT matches: SKIPPED, "not
//      selected by --filter 'GLOB'" (naming the variants there are). The variants VARIANT does not
//      match are left out of the scenario (Scenario::left_out), and a check naming one is skipped;
//   4. a file that does not load: UNRESOLVED, with the loader's error;
//   5. a name an earlier file already used: UNRESOLVED, "FILE: scenario name 'N' is already used by F";
//   6. limits that do not resolve (the scenario's card or cap with --context, say): UNRESOLVED;
//   7. a variant naming a workload this program does not register (workload/workload_registry.h):
//      UNRESOLVED, "FILE: workload 'x' is not registered in this program ...";
//   8. a backend the scenario does not list: UNSUPPORTED, "runs on cpu, not meta (run it with
//      --backend cpu)"; a variant whose real ranks this machine cannot run (a world above its GPUs
//      on cuda): UNSUPPORTED with the reason for the largest world, "needs 2 GPUs for NCCL ranks, this
//      machine has 0 (...)" (Note [Ranks need a GPU each], run/rank_children.h); a backend that is not
//      available here: UNSUPPORTED with the backend's reason;
//   9. otherwise it runs.
// With the default --filter '*' nothing is SKIPPED.
//
// Error policy: PlanRun returns false only for usage errors: a path that does not exist, or a bad
// --card/--cap/--context/--inject/--shard or GoogleTest variable (checked once, before any file is
// read). Everything a scenario file does wrong is a planned result.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/run_results.h"
#include "model/scenario.h"
#include "run/run_options.h"

namespace oomguard {

// Whether a backend can run here; fills *why when not (the runner asks BackendDriver::Available,
// backends/backend.h).
using BackendCheck = std::function<bool(const std::string& backend, std::string* why)>;
// Whether a backend can run a variant's `world` real ranks here; fills *why when not (the runner asks
// RanksUnsupported with the driver's device count). Empty: every world runs.
using RanksCheck = std::function<bool(const std::string& backend, int64_t world, std::string* why)>;

struct PlannedScenario {
  Scenario scenario;  // as loaded; default when it did not load
  // name, file, summary and backend, and card and cap_bytes once its limits resolve. When it does not
  // run, also its final code (UNRESOLVED, UNSUPPORTED or SKIPPED) and the reason in `error`; when it
  // runs, the code is the verdict's to give (verdict/verdict.h JudgeScenario).
  ScenarioResult result;
  bool runs = false;
};

struct RunPlan {
  std::vector<PlannedScenario> scenarios;  // this shard's files (every file when not sharded), in catalog order
  ShardTally shard;                        // the shard, and how many of the run's files it took
  std::vector<std::string> notes;          // files passed over without a result (rule 1), one line each
};

[[nodiscard]] bool PlanRun(const RunOptions& options, const std::string& backend, const BackendCheck& available,
                           RunPlan* plan, std::string* error, const RanksCheck& ranks = {});

}  // namespace oomguard
