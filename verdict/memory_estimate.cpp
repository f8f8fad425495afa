#include "verdict/memory_estimate.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "model/dtype.h"
#include "model/layer_kinds.h"

namespace oomguard {
namespace {

int64_t OptimizerBytesPerParameter(const OptimizerSpec& optimizer) {
  if (optimizer.kind == "adam" || optimizer.kind == "adamw") return 8;
  if (optimizer.kind == "sgd" && optimizer.momentum != 0) return 4;
  return 0;
}

// The rule's bytes per parameter for parameters, gradients and optimizer state. With master weights it
// is mixed precision's (Note [Master weights], workload/loop/master_weights.h): parameters and gradients in
// the model's dtype, the state a float32 master (4) beside the optimizer's own float32 state.
struct BytesPerParameter {
  int64_t parameters, gradients, optimizer;
};

BytesPerParameter RuleBytes(const VariantSpec& spec) {
  const int64_t state = OptimizerBytesPerParameter(spec.loop.optimizer);
  if (!spec.loop.optimizer.master_weights) return {4, 4, state};
  const int64_t dtype_bytes = BytesPerElement(spec.model.dtype);
  return {dtype_bytes, dtype_bytes, 4 + state};
}

}  // namespace

std::optional<MemoryEstimate> EstimateMemory(const Scenario& scenario, const VariantSpec& spec,
                                             const VariantMeasurement& m) {
  if (!scenario.estimate) return std::nullopt;
  int64_t blocks = 0, hidden = 0;
  for (const LayerSpec& layer : spec.model.layers) {
    if (!LayerKindOf(layer).transformer_block) continue;
    ++blocks;
    hidden = layer.dim;
  }
  if (blocks == 0) return std::nullopt;
  const int64_t dtype_bytes = BytesPerElement(spec.model.dtype);
  const int64_t seq = spec.data.shape.empty() ? 1 : spec.data.shape.front();
  const double factor = scenario.estimate->activation_factor;

  MemoryEstimate e;
  e.parameter_count = m.param_bytes / dtype_bytes;
  const int64_t n = e.parameter_count;
  char factor_text[32];
  std::snprintf(factor_text, sizeof factor_text, "%g", factor);
  e.activation_formula = std::to_string(spec.data.batch) + " x " + std::to_string(seq) + " x " +
                         std::to_string(hidden) + " x " + std::to_string(blocks) + " blocks x " +
                         std::to_string(dtype_bytes) + " bytes x " + factor_text;
  // In double: a batch of 2^62 would overflow the product in int64_t. Saturated at int64_t's largest.
  const double product = static_cast<double>(spec.data.batch) * static_cast<double>(seq) *
                         static_cast<double>(hidden) * static_cast<double>(blocks) *
                         static_cast<double>(dtype_bytes) * factor;
  const auto activations =
      product >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(std::llround(product));
  const BytesPerParameter rule = RuleBytes(spec);
  const int64_t optimizer = n * rule.optimizer;

  e.rows.push_back({"parameters", m.param_bytes, rule.parameters * n});
  e.rows.push_back({"gradients", m.grad_bytes, rule.gradients * n});
  e.rows.push_back({"optimizer state", m.optimizer_state_bytes, optimizer});
  e.rows.push_back({"activations", m.forward_saved_bytes, activations});
  // The peak is not the sum: activations are freed while gradients arrive, and temporaries come and
  // go. What the peak holds beyond (or short of) the four above is this row; the rule assumes 0.
  std::optional<int64_t> rest;
  if (m.grad_bytes && m.optimizer_state_bytes && m.forward_saved_bytes) {
    rest = m.ledger.peak_bytes - m.param_bytes - *m.grad_bytes - *m.optimizer_state_bytes - *m.forward_saved_bytes;
  }
  e.rows.push_back({"peak minus the four above", rest, 0});
  e.rows.push_back({"peak", m.ledger.peak_bytes, rule.parameters * n + rule.gradients * n + optimizer + activations});
  return e;
}

}  // namespace oomguard
