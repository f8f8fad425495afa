#include "workload/loop/grad_scaler.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "base/check.h"

namespace oomguard {
namespace {
constexpr double kInitScale = 65536.0;
constexpr double kGrowthFactor = 2.0;
constexpr double kBackoffFactor = 0.5;
constexpr int64_t kGrowthInterval = 2000;
}  // namespace

at::Tensor GradScaler::Scale(const at::Tensor& loss) {
  if (!scale_.defined()) {
    const at::TensorOptions on = loss.options().requires_grad(false);
    scale_ = at::full({}, kInitScale, on.dtype(at::kFloat));
    growth_tracker_ = at::full({}, 0, on.dtype(at::kInt));
  }
  return loss * scale_;
}

void GradScaler::Unscale(const std::vector<at::Tensor>& params) {
  OOMGUARD_CHECK(scale_.defined()) << "GradScaler::Unscale before Scale";
  if (found_inf_.defined()) return;
  at::NoGradGuard no_grad;
  // One statement per step, as Python's chain frees each temporary before the next op allocates.
  at::Tensor inv_scale = scale_.to(at::kDouble);
  inv_scale = inv_scale.reciprocal();
  inv_scale = inv_scale.to(at::kFloat);
  const at::Tensor found_inf = at::full({}, 0.0, scale_.options().dtype(at::kFloat));
  // _MultiDeviceReplicator.get copies both to the gradients' device (copy=True), found_inf's first
  // (the first argument of the call that unscales), and keeps found_inf's.
  found_inf_ = found_inf.clone();
  const at::Tensor device_inv_scale = inv_scale.clone();
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (!grads.empty()) at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, device_inv_scale);
}

bool GradScaler::FoundNoInf(bool has_data) const {
  OOMGUARD_CHECK(found_inf_.defined()) << "GradScaler::FoundNoInf before Unscale";
  return !has_data || found_inf_.item<float>() == 0.0f;
}

void GradScaler::Update() {
  OOMGUARD_CHECK(found_inf_.defined()) << "GradScaler::Update before Unscale";
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, kGrowthFactor, kBackoffFactor, kGrowthInterval);
  found_inf_ = at::Tensor();
}

}  // namespace oomguard
