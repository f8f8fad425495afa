// What MeasureVariant measures: the body of one variant's run, either the catalog's training loop
// over a layer list (workload.cpp) or a registered workload's function (user_workload_run.h). The
// measurement around it (limits, ledger, transfers, snapshots, the failures it catches) is the same.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

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

// The live bytes at a refusal by category: the tracked parameters and their gradients, the optimizer's
// state and the inputs; the rest (kept losses with their graphs too) is activations and transients, so
// that the categories add up to what was live.
inline LiveBreakdown BreakdownByCategory(int64_t live_at_refusal, const VariantMeasurement& m,
                                         const std::vector<at::Tensor>& parameters, int64_t inputs_bytes) {
  LiveBreakdown b;
  b.parameters_bytes = m.param_bytes;
  for (const at::Tensor& p : parameters) {
    if (p.grad().defined()) b.gradients_bytes += static_cast<int64_t>(p.grad().nbytes());
  }
  b.optimizer_state_bytes = m.optimizer_state_bytes.value_or(0);
  b.inputs_bytes = inputs_bytes;
  b.activations_and_transient_bytes =
      live_at_refusal - b.parameters_bytes - b.gradients_bytes - b.optimizer_state_bytes - b.inputs_bytes;
  return b;
}

}  // namespace oomguard
