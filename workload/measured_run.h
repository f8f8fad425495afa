// What MeasureVariant measures: the body of one variant's run, either the catalog's training loop
// over a layer list (workload.cpp) or a registered workload's function (user_workload_run.h). The
// measurement around it (limits, ledger, transfers, snapshots, the failures it catches) is the same.
#pragma once

#include <cstdint>

#include "model/measurement.h"

namespace oomguard {

class MeasuredRun {
 public:
  virtual ~MeasuredRun() = default;
  // Runs the variant, filling the measurement it was made with; throws what the run raises.
  virtual void Run() = 0;
  // What was live when the refused allocation was asked for, by category (called after a failure).
  virtual LiveBreakdown Breakdown(int64_t live_at_refusal) const = 0;
};

}  // namespace oomguard
