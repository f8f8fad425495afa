// The console report: one block per scenario as it completes, then a summary table and totals.
//
//   PASS  forgotten-no-grad  [cpu, NVIDIA T4 16GB, cap 14.33 GiB]  1.4 s
//         pitfall  PASS  pass  peak 10.50 MiB in eval   live growth 0 bytes/iteration
//         ...
#pragma once

#include <ostream>

#include "model/run_results.h"

namespace oomguard {

struct ConsoleStyle {
  bool color = false;     // ANSI colours for result codes: only on a terminal, never with NO_COLOR set
  bool detailed = false;  // oomguard explain: also each variant's phase peaks and its passing checks
  bool terminal = false;  // a terminal: progress may redraw one line in place (`\r`)
};

// On a terminal: redrawn progress, and colours unless NO_COLOR is set; otherwise plain lines (CI logs,
// pipes).
ConsoleStyle StyleFor(int fd);

// Streaming: one block per scenario as it completes.
void WriteScenarioBlock(const ScenarioResult& scenario, std::ostream& out, const ConsoleStyle& style = {});
// Cumulative: the table (scenario, variant, backend, card, outcome, peak, baseline, delta, delta %, phase of
// the peak) and the totals; the SKIPPED scenarios (report.skipped) are counted there, not listed. A
// sharded run adds "shard 2/3: 6 of 17 scenario files" under the totals.
void WriteRunSummary(const RunResults& report, std::ostream& out, const ConsoleStyle& style = {});

}  // namespace oomguard
