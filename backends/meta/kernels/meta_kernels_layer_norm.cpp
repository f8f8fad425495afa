// native_layer_norm and its backward on meta, as cpu's kernels (ATen/native/layer_norm.cpp,
// cpu/layer_norm_kernel.cpp) or a card's (ATen/native/cuda/layer_norm_kernel.cu) allocate
// (Note [Meta as a card], backends/meta/kernel_target.h). Without these kernels meta would take the
// CompositeExplicitAutograd fallback through native_batch_norm, which has no Meta kernel either.
#include <ATen/AccumulateType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

// mean and rstd's shape: X's leading dims, then ones.
std::vector<int64_t> StatSizes(const at::Tensor& input, size_t normalized_dims) {
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_dims);
  TORCH_CHECK(axis >= 0, "native_layer_norm: normalized_shape has more dimensions than the input");
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().begin() + axis);
  sizes.resize(static_cast<size_t>(input.dim()), 1);
  return sizes;
}

// cuda (layer_norm_cuda): X = input.expect_contiguous() (a copy of a non-contiguous input, dead on
// return; gamma and beta too), Y contiguous like X, then mean and rstd [M] in the accumulate type
// (toAccumulateType(X, is_cuda=true): float for bfloat16 and float16, whatever gamma's dtype), viewed
// to the stat shape.
std::tuple<at::Tensor, at::Tensor, at::Tensor> LayerNormCuda(const at::Tensor& input, const std::vector<int64_t>& stat,
                                                             const std::optional<at::Tensor>& weight,
                                                             const std::optional<at::Tensor>& bias) {
  const at::Tensor x = input.contiguous();
  const at::Tensor gamma = weight.has_value() && weight->defined() ? weight->contiguous() : at::Tensor();
  const at::Tensor beta = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  int64_t m = 1;
  for (int64_t s : stat) m *= s;
  const at::TensorOptions acc = x.options().dtype(at::toAccumulateType(input.scalar_type(), /*is_cuda=*/true));
  at::Tensor mean = at::empty({m}, acc);
  at::Tensor rstd = at::empty({m}, acc);
  return {y, mean.view(stat), rstd.view(stat)};
}

// cpu (layer_norm_cpu): Y like X, mean and rstd [M] shaped X's leading dims plus ones, in X's dtype
// (the parameters' dtype when they are float and X is reduced).
std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeLayerNormMeta(const at::Tensor& input,
                                                                   c10::SymIntArrayRef normalized_shape,
                                                                   const std::optional<at::Tensor>& weight,
                                                                   const std::optional<at::Tensor>& bias, double) {
  const std::vector<int64_t> stat_sizes = StatSizes(input, normalized_shape.size());
  if (CurrentKernelTarget().cuda()) return LayerNormCuda(input, stat_sizes, weight, bias);
  at::ScalarType stat_dtype = input.scalar_type();
  if (weight.has_value() && weight->defined() && weight->scalar_type() != stat_dtype)
    stat_dtype = weight->scalar_type();
  // layer_norm_cpu: X = input.expect_contiguous() first (a copy of a non-contiguous input, such as a
  // transposed [batch, channels, tokens] view, which dies on return), then Y, mean and rstd.
  const at::Tensor x = input.contiguous();
  at::Tensor y = at::empty_like(input, at::MemoryFormat::Contiguous);
  at::Tensor mean = at::empty(stat_sizes, input.options().dtype(stat_dtype));
  at::Tensor rstd = at::empty(stat_sizes, input.options().dtype(stat_dtype));
  return {y, mean, rstd};
}

// cuda/layer_norm_kernel.cu LaunchGammaBetaBackwardCUDAKernel (lines 941-1020 of pytorch main, as of
// torch 2.11): past 64 * 1024 rows, with N / 32 (block_dim_x) under half the card's SMs, the rows are
// split across blocks.y = min(32768 / ceil(N / 32), ceil(M / 32)) blocks (rows_per_block_y 32,
// max_grid_size 64 * 1024 / 2), whose partial sums [blocks.y, N] (dgamma's and dbeta's options) are
// reduced with .sum(0) into new dgamma and dbeta, which replace (and free) the ones allocated before;
// the partial sums die on return. Each .sum(0) is a card's sum, with its own scratch
// (meta_kernels_reduce.cpp).
void GammaBetaPartialSums(int64_t m, int64_t n, at::Tensor& dgamma, at::Tensor& dbeta) {
  constexpr int64_t kBlockDimX = 32, kRowsPerBlockY = 32, kMaxGridSize = 64 * 1024 / 2;
  if (!(dgamma.defined() || dbeta.defined()) || m <= 64 * 1024 ||
      n / kBlockDimX >= CurrentKernelTarget().device.sm_count / 2) {
    return;
  }
  const int64_t blocks_x = (n + kBlockDimX - 1) / kBlockDimX;
  const int64_t blocks_y = std::min(kMaxGridSize / blocks_x, (m + kRowsPerBlockY - 1) / kRowsPerBlockY);
  at::Tensor dgamma_blocks, dbeta_blocks;
  if (dgamma.defined()) dgamma_blocks = at::empty({blocks_y, n}, dgamma.options());
  if (dbeta.defined()) dbeta_blocks = at::empty({blocks_y, n}, dbeta.options());
  if (dgamma_blocks.defined()) dgamma = dgamma_blocks.sum(0);
  if (dbeta_blocks.defined()) dbeta = dbeta_blocks.sum(0);
}

// cpu (layer_norm_backward_cpu, layer_norm_kernel.cpp): X's contiguous copy, dX, dgamma, dbeta as
// masked, then dY's contiguous copy, and a scratch buffer [threads, 2 * N] of X's dtype for the
// dgamma/dbeta partial sums (the profiler's memory events of a transposed input and gradient).
// cuda (layer_norm_backward_cuda): X, gamma and beta contiguous, dX, dgamma, dbeta as masked, then
// LayerNormBackwardKernelImpl's dY.contiguous(); the gamma/beta reduction works in shared memory, with
// no scratch from the caching allocator, except in GammaBetaPartialSums' branch.
std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeLayerNormBackwardMeta(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  const bool has_weight = weight.has_value() && weight->defined();
  const bool has_bias = bias.has_value() && bias->defined();
  const bool cuda = CurrentKernelTarget().cuda();
  const at::Tensor x = input.contiguous();
  const at::Tensor gamma = cuda && has_weight ? weight->contiguous() : at::Tensor();
  const at::Tensor beta = cuda && has_bias ? bias->contiguous() : at::Tensor();
  at::Tensor dx, dgamma, dbeta;
  if (output_mask[0]) dx = at::empty_like(input, at::MemoryFormat::Contiguous);
  if (output_mask[1] && has_weight) dgamma = at::empty_like(*weight, at::MemoryFormat::Contiguous);
  if (output_mask[2] && has_bias) dbeta = at::empty_like(*bias, at::MemoryFormat::Contiguous);
  const at::Tensor dy = grad_out.contiguous();
  int64_t n = 1;
  for (const c10::SymInt& s : normalized_shape) n *= s.expect_int();
  if (cuda) {
    if (n > 0) GammaBetaPartialSums(input.numel() / n, n, dgamma, dbeta);
    return {dx, dgamma, dbeta};
  }
  if (dgamma.defined() || dbeta.defined()) (void)at::empty({at::get_num_threads(), 2 * n}, input.options());
  return {dx, dgamma, dbeta};
}

}  // namespace

void RegisterLayerNorm(torch::Library& meta) {
  meta.impl("native_layer_norm", TORCH_FN(NativeLayerNormMeta));
  meta.impl("native_layer_norm_backward", TORCH_FN(NativeLayerNormBackwardMeta));
}

}  // namespace oomguard::meta_kernels
