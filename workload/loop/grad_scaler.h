// Loss scaling for float16 autocast, as torch.amp.GradScaler does it with its defaults (scale 2^16,
// growth 2 every 2000 finite steps, backoff 0.5), tensor for tensor, so that its small allocations are
// the ones a Python training step makes:
//
//   GradScaler scaler;
//   scaler.Scale(loss).backward();   // loss * scale (scale and growth tracker made on first use)
//   scaler.Unscale(params);          // grads *= 1/scale, infs and NaNs noted; once per step
//   if (scaler.FoundNoInf(has_data)) optimizer.step();  // a step with inf gradients is skipped
//   scaler.Update();                 // grows or backs off the scale
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace oomguard {

class GradScaler {
 public:
  at::Tensor Scale(const at::Tensor& loss);
  // Unscales the gradients of `params` that have one (call before clipping them); idempotent per step.
  void Unscale(const std::vector<at::Tensor>& params);
  // Whether the step may run: no inf or NaN among the unscaled gradients. Without data (meta), nothing
  // is known, and the step runs.
  bool FoundNoInf(bool has_data) const;
  // After the step: the scale for the next one; forgets this step's inf check.
  void Update();

 private:
  at::Tensor scale_;           // float32 scalar on the loss's device
  at::Tensor growth_tracker_;  // int32 scalar
  at::Tensor found_inf_;       // this step's, after Unscale: the copy GradScaler keeps per device
};

}  // namespace oomguard
