// The analytic estimate a scenario's teach text states, next to what was measured, component by
// component, so a report can show where the rule of thumb is off and by how much.
//
//   std::optional<oomguard::MemoryEstimate> e = oomguard::EstimateMemory(scenario, spec, measurement);
//   for (const auto& row : e->rows) ...  // parameters, gradients, optimizer state, activations, ...
//
// The rule (EstimateSpec, scenario.h): parameters 4, gradients 4 and Adam state 8 bytes per parameter
// (16 bytes, the fp32 mixed-precision-free rule; SGD with momentum 4, plain SGD 0), activations
// batch x seq x hidden x layers x dtype bytes x activation_factor over the transformer blocks (the
// kinds LayerKindInfo::transformer_block marks). With loop.optimizer.master_weights, mixed precision's
// rule instead: parameters and gradients at the model's dtype, optimizer state a float32 master 4 plus
// float32 state (Adam 2 + 2 + 12, SGD with momentum 4 + 4, plain SGD 4; Note [Master weights],
// workload/loop/master_weights.h). The parameter count comes from the measured parameter bytes and the
// model's dtype (BytesPerElement, model/dtype.h): a rank's under `parallel`, so fsdp's shards are
// counted as such; nothing is divided by the world (zero1 and zero2 shard only the state, which the
// rule keeps whole).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/measurement.h"
#include "model/run_results.h"
#include "model/scenario.h"

namespace oomguard {

// None when the scenario states no estimate or its model has no transformer block.
std::optional<MemoryEstimate> EstimateMemory(const Scenario& scenario, const VariantSpec& spec,
                                             const VariantMeasurement& measured);

}  // namespace oomguard
