// Batch norm's native CUDA path on a card (`--kernels cuda`): cuda/Normalization.cu's batch_norm_cuda
// and batch_norm_backward_cuda with the host templates of cuda/Normalization.cuh, each transient they
// take from the caching allocator freed where the source frees it (PyTorch 2.11).
#include <ATen/AccumulateType.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"
#include "backends/meta/kernels/meta_kernels_norm_cuda.h"

namespace oomguard::meta_kernels {
namespace {

at::TensorOptions AccOptions(const at::Tensor& input) {
  return input.options().dtype(at::toAccumulateType(input.scalar_type(), /*is_cuda=*/true));
}

// cuda/detail/IndexUtils.cu canUse32BitIndexMath: fewer elements than INT32_MAX, and the last one's
// offset under it too.
bool CanUse32BitIndexMath(const at::Tensor& t) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const int64_t elements = t.numel();
  if (elements >= kMax) return false;
  if (elements == 0) return true;
  int64_t offset = 0, linear = elements - 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (linear % t.size(d)) * t.stride(d);
    linear /= t.size(d);
  }
  return offset < kMax;
}

// Normalization.cu batch_norm_use_channels_last_kernels (channels-last 3d since PR #107270).
bool UseChannelsLastKernels(const at::Tensor& t) {
  return t.is_contiguous(at::MemoryFormat::ChannelsLast) || t.is_contiguous(at::MemoryFormat::ChannelsLast3d) ||
         (t.is_contiguous() && t.stride(1) == 1);
}

// Normalization.cu batch_norm_choose_impl.
enum class Impl { kContiguous, kChannelsLast, kGeneral };
Impl ChooseImpl(const at::Tensor& t) {
  if (!CanUse32BitIndexMath(t)) return Impl::kGeneral;
  if (t.is_contiguous()) return t.stride(1) == 1 ? Impl::kChannelsLast : Impl::kContiguous;
  return t.is_contiguous(at::MemoryFormat::ChannelsLast) ? Impl::kChannelsLast : Impl::kGeneral;
}
Impl ChooseImpl(const at::Tensor& a, const at::Tensor& b) {
  const Impl first = ChooseImpl(a);
  if (first == Impl::kGeneral) return first;
  return ChooseImpl(b) == first ? first : Impl::kGeneral;
}

bool ContiguousOrUndefined(const at::Tensor& t) { return !t.defined() || t.is_contiguous(); }

// cuda/LaunchUtils.h lastPow2: the largest power of two not above n, at least 1.
int64_t LastPow2(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Normalization.cuh flexible_launch_configs with coop_flag: the grid of the channels-last reductions,
// from the reduction size and the channel count alone (no SM count).
struct Grid {
  int64_t x, y;
};
Grid CooperativeGrid(int64_t reduction, int64_t stride) {
  constexpr int64_t kMaxBlock = 512, kTileW = 32, kPerThread = 16, kMaxHBlock = 128;
  int64_t block_x = std::min(LastPow2(stride), kTileW);
  const int64_t block_y = std::min(LastPow2((reduction + kPerThread - 1) / kPerThread), kMaxBlock / block_x);
  if (block_x * block_y != kMaxBlock) block_x = std::min(LastPow2(stride), kMaxBlock / block_y);
  const int64_t grid_y = std::min((reduction + block_y * kPerThread - 1) / (block_y * kPerThread), kMaxHBlock);
  return {(stride + block_x - 1) / block_x, grid_y < 8 ? 1 : grid_y};
}

// Note [A card's batch norm reductions]: the channels-last kernels (batch_norm_stats_channels_last_
// cuda_template, batch_norm_backward_reduce_cuda_channels_last_template) reduce over a grid of
// CooperativeGrid blocks; with more than one row of blocks they stage partial sums in global memory,
// an accumulate-type buffer of `per_channel` x C x grid.y (4 for mean, M2 and count in the forward, 2
// for sum_dy and sum_dy_xmu in the backward) and zeroed int32 semaphores [grid.x], both freed when the
// template returns. The grid comes from the shapes alone, so the bytes are exact. The General path's
// statistics (an input dense in no 2-d format: channels-last 3d, or past 32-bit indexing) are
// at::native::var_mean_out(save_var, save_mean, input, {0, 2, ...}, unbiased=false, keepdim=false):
// Reduce.cuh's Welford reduction into the accumulate-type statistics, whose global scratch follows the
// card's SM count (Note [Welford's scratch on a card], meta_kernels_reduce_moments.cpp).
void ChannelsLastReductionStaging(const at::Tensor& input, const at::TensorOptions& acc, int64_t per_channel) {
  const int64_t stride = input.size(1), reduction = input.numel() / stride;
  const Grid grid = CooperativeGrid(reduction, stride);
  if (grid.y <= 1) return;
  at::Tensor staging = at::empty({per_channel * stride * grid.y}, acc);
  at::Tensor semaphores = at::zeros({grid.x}, input.options().dtype(at::kInt));
}

// batch_norm_mean_var (training): the contiguous kernel allocates nothing (input.reshape is a view).
void StatisticsScratch(const at::Tensor& input, const at::TensorOptions& acc) {
  switch (ChooseImpl(input)) {
    case Impl::kContiguous:
      return;
    case Impl::kChannelsLast:
      ChannelsLastReductionStaging(input, acc, 4);  // save_mean and save_var are contiguous [C]
      return;
    case Impl::kGeneral: {
      std::vector<int64_t> reduce_dims{0};
      for (int64_t d = 2; d < input.dim(); ++d) reduce_dims.push_back(d);
      CudaWelfordScratch(input, reduce_dims, false, static_cast<int64_t>(acc.dtype().itemsize()));
      return;
    }
  }
}

// batch_norm_elementwise: the General path broadcasts a missing weight or bias as a 0-dim tensor on the
// card (at::scalar_tensor(1 or 0, mean's options)), freed on return.
void ElementwiseScratch(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                        const at::TensorOptions& acc) {
  const Impl impl = ChooseImpl(input);
  if (impl == Impl::kContiguous) return;
  if (impl == Impl::kChannelsLast && ContiguousOrUndefined(weight) && ContiguousOrUndefined(bias)) return;
  at::Tensor one = weight.defined() ? at::Tensor() : at::scalar_tensor(1, acc);
  at::Tensor zero = bias.defined() ? at::Tensor() : at::scalar_tensor(0, acc);
}

// batch_norm_backward_reduce_cuda: sum_dy, sum_dy_xmu, grad_weight, grad_bias. The channels-last
// template makes all four whatever the mask (empty [0] ones without a weight) and stages; the other
// reshapes its operands to [N, C, -1] (a copy of one that is not viewable so, dead on return) and
// makes what the mask asks.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> BackwardReduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const at::Tensor& weight, std::array<bool, 3> mask) {
  const int64_t channels = input.size(1);
  if (CanUse32BitIndexMath(grad_out) && UseChannelsLastKernels(grad_out) && UseChannelsLastKernels(input) &&
      ContiguousOrUndefined(weight) && mean.is_contiguous() && invstd.is_contiguous()) {
    at::Tensor sum_dy = at::empty({channels}, mean.options());
    at::Tensor sum_dy_xmu = at::empty({channels}, mean.options());
    const at::TensorOptions param = weight.defined() ? weight.options() : mean.options();
    at::Tensor grad_weight = at::empty({weight.defined() ? channels : 0}, param);
    at::Tensor grad_bias = at::empty({weight.defined() ? channels : 0}, param);
    ChannelsLastReductionStaging(input, mean.options(), 2);
    return {sum_dy, sum_dy_xmu, grad_weight, grad_bias};
  }
  const at::Tensor input_r = input.reshape({input.size(0), channels, -1});
  const at::Tensor grad_r = grad_out.reshape(input_r.sizes());
  at::Tensor sum_dy, sum_dy_xmu, grad_weight, grad_bias;
  if (mask[0]) {
    sum_dy = at::empty_like(mean, at::MemoryFormat::Contiguous);
    sum_dy_xmu = at::empty_like(mean, at::MemoryFormat::Contiguous);
  }
  if (mask[1]) grad_weight = at::empty({channels}, weight.options());
  if (mask[2]) grad_bias = at::empty({channels}, weight.options());
  return {sum_dy, sum_dy_xmu, grad_weight, grad_bias};
}

// batch_norm_elementwise_backward_train: by batch_norm_choose_impl(input, grad_out), the contiguous
// template's grad_input (contiguous), the channels-last one's (empty_like(input)), or the General
// path's, in the input's suggested format (PR #107270), after a 0-dim weight when there is none.
at::Tensor ElementwiseBackwardTrain(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                                    const at::Tensor& mean, const at::Tensor& invstd) {
  const Impl impl = ChooseImpl(input, grad_out);
  if (impl == Impl::kContiguous) return at::empty_like(input, at::MemoryFormat::Contiguous);
  if (impl == Impl::kChannelsLast && ContiguousOrUndefined(weight) && mean.is_contiguous() && invstd.is_contiguous())
    return at::empty_like(input);
  at::Tensor one = weight.defined() ? at::Tensor() : at::scalar_tensor(1.0, input.options().dtype(mean.scalar_type()));
  return at::empty(input.sizes(), grad_out.options().memory_format(input.suggest_memory_format()));
}

}  // namespace

// batch_norm_cuda: the output like the input (empty_like), save_mean and save_invstd [C] in the
// accumulate type, in training and evaluation alike (eval copies running_mean into save_mean, [C]
// too); then batch_norm_mean_var's and batch_norm_elementwise's scratch.
std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormCuda(const at::Tensor& input, const at::Tensor& weight,
                                                             const at::Tensor& bias, const at::Tensor& running_mean,
                                                             const at::Tensor&, bool train) {
  TORCH_CHECK(train || running_mean.defined(), "batch_norm: evaluation needs running statistics on a card");
  at::Tensor output = at::empty_like(input);
  const at::TensorOptions acc = AccOptions(input);
  at::Tensor save_mean = at::empty({input.size(1)}, acc);
  at::Tensor save_invstd = at::empty({input.size(1)}, acc);
  if (train) StatisticsScratch(input, acc);
  ElementwiseScratch(input, weight, bias, acc);
  return {output, save_mean, save_invstd};
}

// batch_norm_backward_cuda. The fused kernel (a reduction and a grad_input wanted, an input the
// channels-last kernels do not take, 32-bit indexing) reshapes input and grad_out to [N, C, -1] (a
// copy of one not viewable so: a channels-last grad_out for a contiguous input) and makes its outputs.
// Otherwise: mean and invstd from save_mean/save_invstd, or from the running statistics where those
// are empty (cuDNN's evaluation outputs: running_mean cast to the accumulate type, invstd [C]
// computed), the reduction, then grad_input.
std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormBackwardCuda(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& running_mean,
    const at::Tensor& running_var, const at::Tensor& save_mean, const at::Tensor& save_invstd, bool train,
    std::array<bool, 3> mask) {
  const bool needs_reduction = train || mask[1] || mask[2];
  const int64_t channels = input.size(1);
  if (needs_reduction && mask[0] && !UseChannelsLastKernels(input) && CanUse32BitIndexMath(input) &&
      CanUse32BitIndexMath(grad_out)) {
    const at::Tensor input_r = input.reshape({input.size(0), channels, -1});
    const at::Tensor grad_r = grad_out.reshape(input_r.sizes());
    at::Tensor grad_input = at::empty_like(input, at::MemoryFormat::Contiguous);
    at::Tensor grad_weight = mask[1] ? at::empty_like(weight, at::MemoryFormat::Contiguous) : at::Tensor();
    at::Tensor grad_bias = mask[2] ? at::empty_like(weight, at::MemoryFormat::Contiguous) : at::Tensor();
    return {grad_input, grad_weight, grad_bias};
  }
  const at::TensorOptions acc = AccOptions(input);
  TORCH_CHECK(save_mean.defined() && save_invstd.defined(), "batch_norm_backward: save_mean and save_invstd needed");
  at::Tensor mean;
  if (save_mean.numel() != 0) {
    mean = save_mean;
  } else if (needs_reduction) {
    TORCH_CHECK(!train && running_mean.defined(), "batch_norm_backward: empty save_mean in training");
    mean = running_mean.scalar_type() == acc.dtype().toScalarType() ? running_mean : running_mean.to(acc.dtype());
  }
  at::Tensor invstd;
  if (save_invstd.numel() != 0) {
    invstd = save_invstd;
  } else {
    TORCH_CHECK(!train && running_var.defined(), "batch_norm_backward: empty save_invstd in training");
    invstd = at::empty({channels}, acc);
  }
  at::Tensor sum_dy, sum_dy_xmu, grad_weight, grad_bias;
  if (needs_reduction) {
    std::tie(sum_dy, sum_dy_xmu, grad_weight, grad_bias) = BackwardReduce(grad_out, input, mean, invstd, weight, mask);
  }
  at::Tensor grad_input;
  if (mask[0]) {
    grad_input = train ? ElementwiseBackwardTrain(grad_out, input, weight, mean, invstd)
                       : at::empty(input.sizes(), grad_out.options());  // batch_norm_elementwise_backward_eval
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace oomguard::meta_kernels
