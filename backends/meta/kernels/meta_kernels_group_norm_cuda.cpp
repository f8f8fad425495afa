// Group norm on a card (`--kernels cuda`, Note [Meta as a card]): group_norm.cpp's native_group_norm and
// native_group_norm_backward with cuda/group_norm_kernel.cu's kernels, transients included.
#include <ATen/AccumulateType.h>

#include "backends/meta/kernels/meta_kernels_norm_cuda.h"

namespace oomguard::meta_kernels {
namespace {

// Note [A card's group norm transients]: PyTorch 2.11's group_norm_kernel.cu (the version before
// GroupNormBackwardMultipleGradsKernel: the 2.11 build's kernels take no dmean/drstd and read mean and
// rstd in X's dtype, RowwiseMomentsCUDAKernel<T>(N, eps, X, mean, rstd)) works in acc_type<T, true>,
// float for half and bfloat16, X's dtype otherwise, and frees all it allocates on return:
//   forward (GroupNormKernelImplInternal), HxW > 1 with gamma or beta: the fused scale and shift a and
//     b, [N, C] each (ComputeFusedParamsCUDAKernel); HxW == 1 (GroupNorm1dForward) and no affine
//     parameters: nothing.
//   backward (GroupNormBackwardKernelImplInternal): ds and db [N, C] first, for every HxW; then, for a
//     dX, HxW == 1 (GroupNorm1dBackward): c2 and c3 [N, G]; HxW > 1: c1 (at::empty({0}) that the
//     TensorIterator of rstd [N, G, 1] x gamma [1, G, D] resizes to [N, G, D] when gamma is defined:
//     booked whole here, as resize_ on meta books nothing) after c2 and c3 [N, G]; c1-c3 die with the
//     dX block, ds and db on return. The dgamma/dbeta kernels reduce ds and db in shared memory.
at::TensorOptions AccOptions(const at::Tensor& x) {
  return x.options().dtype(at::toAccumulateType(x.scalar_type(), /*is_cuda=*/true));
}

// The CUDA kernels read gamma, beta, mean and rstd as X's dtype (gamma.const_data_ptr<T>()), so float
// parameters for a reduced-precision X, which cpu runs as mixed types, stop a card with the check
// data_ptr makes.
void CheckSameDtype(const at::Tensor& x, const at::Tensor& p) {
  TORCH_CHECK(!p.defined() || p.scalar_type() == x.scalar_type(), "expected scalar type ", x.scalar_type(),
              " but found ", p.scalar_type());
}

}  // namespace

// native_group_norm on cuda: X contiguous, Y contiguous like it, mean and rstd [N, group] in X's dtype,
// then the kernel's a and b (Note [A card's group norm transients]).
std::tuple<at::Tensor, at::Tensor, at::Tensor> GroupNormCuda(const at::Tensor& input, const at::Tensor& gamma,
                                                             const at::Tensor& beta, int64_t n, int64_t c, int64_t hxw,
                                                             int64_t group) {
  TORCH_CHECK(input.is_contiguous(), "native_group_norm: expected a contiguous input on a card");
  CheckSameDtype(input, gamma);
  CheckSameDtype(input, beta);
  at::Tensor y = at::empty_like(input, at::MemoryFormat::Contiguous);
  at::Tensor mean = at::empty({n, group}, input.options());
  at::Tensor rstd = at::empty({n, group}, input.options());
  if (n > 0 && hxw != 1 && (gamma.defined() || beta.defined())) {
    at::Tensor a = at::empty({n, c}, AccOptions(input));
    at::Tensor b = at::empty({n, c}, AccOptions(input));
  }
  return {y, mean, rstd};
}

// native_group_norm_backward on cuda: dX contiguous like X, dgamma and dbeta [C] like gamma, as the
// mask asks; then the kernel's transients (Note [A card's group norm transients]).
std::tuple<at::Tensor, at::Tensor, at::Tensor> GroupNormBackwardCuda(const at::Tensor& grad_out,
                                                                     const at::Tensor& input, const at::Tensor& gamma,
                                                                     int64_t n, int64_t c, int64_t hxw, int64_t group,
                                                                     std::array<bool, 3> mask) {
  TORCH_CHECK(input.scalar_type() == grad_out.scalar_type(), "Expected scalar types of X and dY are same.");
  CheckSameDtype(input, gamma);
  at::Tensor dx, dgamma, dbeta;
  if (mask[0]) dx = at::empty_like(input, at::MemoryFormat::Contiguous);
  if (mask[1]) dgamma = at::empty_like(gamma, at::MemoryFormat::Contiguous);
  if (mask[2]) dbeta = at::empty_like(gamma, at::MemoryFormat::Contiguous);
  if (n == 0) return {dx, dgamma, dbeta};
  const at::TensorOptions acc = AccOptions(input);
  at::Tensor ds = at::empty({n, c}, acc);
  at::Tensor db = at::empty({n, c}, acc);
  if (dx.defined()) {
    at::Tensor c2 = at::empty({n, group}, acc);
    at::Tensor c3 = at::empty({n, group}, acc);
    at::Tensor c1 = hxw != 1 && gamma.defined() ? at::empty({n, group, c / group}, acc) : at::Tensor();
  }
  return {dx, dgamma, dbeta};
}

}  // namespace oomguard::meta_kernels
