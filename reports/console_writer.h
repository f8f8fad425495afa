// The console report: one block per scenario as it completes, then a summary table and totals.
//
//   PASS  forgotten-no-grad  [cpu, NVIDIA T4 16GB, cap 14.33 GiB]  1.4 s
//         pitfall  PASS  pass  peak 10.50 MiB in eval   live growth 0 bytes/iteration
//         ...
#pragma once

#include <ostream>

#include "harness/run_results.h"

namespace oomguard {

// detailed (oomguard explain): also each variant's phase peaks and its passing checks.
void WriteScenarioBlock(const ScenarioResult& scenario, std::ostream& out, bool detailed = false);
void WriteRunSummary(const RunReport& report, std::ostream& out);

}  // namespace oomguard
