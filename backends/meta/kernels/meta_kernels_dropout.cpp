// Dropout on meta, as cpu or a card's CUDA kernels run it (Note [Meta as a card], backends/meta/kernel_target.h).
//
// Note [Dropout by device]: at::dropout (ATen/native/Dropout.cpp) is CompositeImplicitAutograd. On cuda
// its is_fused_kernel_acceptable (a cuda input, 0 < p < 1, numel > 0) sends training dropout to
// at::native_dropout, whose kernel (ATen/native/cuda/Dropout.cu, native_dropout_cuda -> dropout_cuda)
// allocates a 1-byte bool mask and the output, and NativeDropoutBackward0 saves the mask. On cpu (and
// meta) the composite's _dropout<false> draws a noise tensor in the input's dtype
// (empty_like(input).bernoulli_(1 - p).div_(1 - p)) and multiplies: autograd saves the noise. The
// AutogradMeta kernel below takes cuda's branch in cuda mode and calls the composite itself otherwise,
// so cpu mode is what meta always did. dropout_, feature_dropout and alpha_dropout take the composite
// on every device (no fused path), so they need nothing here.
#include <ATen/ops/dropout_native.h>

#include <optional>
#include <tuple>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

// Dropout.cpp's is_fused_kernel_acceptable, for an input on the card.
bool FusedOnCard(const at::Tensor& input, double p) { return p > 0 && p < 1 && input.sym_numel() > 0; }

at::Tensor DropoutAutogradMeta(const at::Tensor& input, double p, bool train) {
  if (CurrentKernelTarget().cuda() && train && FusedOnCard(input, p)) {
    return std::get<0>(at::native_dropout(input, p, train));  // redispatches: autograd records it
  }
  return at::native::dropout(input, p, train);
}

// native_dropout's own allocations. cpu (native_dropout_cpu): training, the bool mask, then the output
// (input.mul(mask).mul_(scale)); eval, the output and a mask of ones. cuda (native_dropout_cuda): eval,
// self.clone() and ones_like(bool); training (dropout_cuda), the bool mask first, then the output.
std::tuple<at::Tensor, at::Tensor> NativeDropoutMeta(const at::Tensor& input, double, std::optional<bool> train) {
  const at::TensorOptions mask_options = input.options().dtype(at::kBool);
  if (train.has_value() && !*train) {
    if (CurrentKernelTarget().cuda()) {
      at::Tensor output = at::empty_like(input);
      return {output, at::empty_like(input, mask_options)};
    }
    return {at::empty_like(input), at::empty({0}, mask_options)};
  }
  if (CurrentKernelTarget().cuda()) {
    at::Tensor mask = at::empty_like(input, mask_options);
    return {at::empty_like(input), mask};
  }
  return {at::empty_like(input), at::empty_like(input, mask_options)};
}

// cpu and cuda (masked_scale_cuda) alike: one output like the gradient.
at::Tensor NativeDropoutBackwardMeta(const at::Tensor& grad, const at::Tensor&, double) { return at::empty_like(grad); }

}  // namespace

void RegisterDropout(torch::Library& meta, torch::Library& autograd_meta) {
  meta.impl("native_dropout", TORCH_FN(NativeDropoutMeta));
  meta.impl("native_dropout_backward", TORCH_FN(NativeDropoutBackwardMeta));
  autograd_meta.impl("dropout", TORCH_FN(DropoutAutogradMeta));
}

}  // namespace oomguard::meta_kernels
