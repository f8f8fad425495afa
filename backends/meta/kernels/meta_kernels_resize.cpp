// Meta kernels for 2-d interpolation (F.interpolate, nn.Upsample: upsample_nearest2d and
// upsample_bilinear2d, forward and backward), whose cpu kernels allocate beside the output that the
// structured Meta functions allocate (ATen/native/cpu/UpSampleKernel.cpp, UpSampleMoreKernel.cpp):
// - forward, the channels-last kernel (cpu takes it when the input is channels-last with more than 3
//   channels, when output height + width <= 128, and, for bilinear, on one thread with 3 channels):
//   the input and the output contiguous in channels-last (copies of NCHW tensors, the output's copied
//   back at the end), both freed on return;
// - forward, the generic kernel otherwise: per interpolated dimension, height then width, an int64
//   index and a weight in the input's dtype shaped [1, 1, out, 1] (two of each for bilinear), alive
//   until the kernel returns;
// - backward: grad_output and grad_input contiguous (in channels-last when grad_output is), copies
//   where they are not.
// Each kernel first lets the structured Meta function (at::meta::...) make the output, as cpu's does.
// In card mode (Note [Meta as a card]) the rest follows Note [Interpolation on a card].
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/ops/upsample_bilinear2d_backward_meta_dispatch.h>
#include <ATen/ops/upsample_bilinear2d_meta_dispatch.h>
#include <ATen/ops/upsample_nearest2d_backward_meta_dispatch.h>
#include <ATen/ops/upsample_nearest2d_meta_dispatch.h>

#include <vector>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;

// _use_vectorized_kernel_cond_2d, and bilinear's extra condition.
bool ChannelsLastKernel(const at::Tensor& output, const at::Tensor& input, bool bilinear) {
  return (input.is_contiguous(kChannelsLast) && input.size(1) > 3) || output.size(-2) + output.size(-1) <= 128 ||
         (bilinear && at::get_num_threads() == 1 && input.size(1) == 3);
}

// Note [Interpolation on a card]
// PyTorch 2.11's CUDA kernels (UpSampleNearest2d.cu, UpSampleBilinear2d.cu) compute no index or weight
// tensors and keep no channels-last copies of NCHW tensors: output and grad_input come from the
// structured Meta functions (the input's, resp. grad_output's, suggested format), and beside them
// - nothing when the sizes do not change (a copy_);
// - the channels-last kernel, taken when the source suggests channels-last, has at least 4 channels
//   (16 for bilinear's forward) and the destination is channels-last: the source made contiguous in
//   channels-last (a copy only when it is not);
// - otherwise nearest (both ways) and bilinear's backward compute into a contiguous destination (an
//   NCHW buffer when the destination is channels-last, copied back and freed) from the source made
//   contiguous (a copy of a channels-last source); bilinear's forward reads and writes in place through
//   strided accessors, allocating nothing.
// So a card allocates nothing beside the output for NCHW tensors, where cpu keeps index and weight
// tensors or, at small outputs, channels-last copies of input and output.
void CardForward(const at::Tensor& output, const at::Tensor& input, bool bilinear) {
  if (input.numel() == 0 || input.sizes() == output.sizes()) return;
  if (input.suggest_memory_format() == kChannelsLast && input.size(1) >= (bilinear ? 16 : 4) &&
      output.is_contiguous(kChannelsLast)) {
    const at::Tensor input_cl = input.contiguous(kChannelsLast);
    return;
  }
  if (bilinear) return;
  at::Tensor output_c;
  if (!output.is_contiguous()) output_c = at::empty(output.sizes(), output.options());
  const at::Tensor input_c = input.contiguous();
}
void CardBackward(const at::Tensor& grad_input, const at::Tensor& grad_output) {
  if (grad_input.numel() == 0 || grad_output.sizes() == grad_input.sizes()) return;
  if (grad_output.suggest_memory_format() == kChannelsLast && grad_input.size(1) >= 4 &&
      grad_input.is_contiguous(kChannelsLast)) {
    const at::Tensor grad_output_cl = grad_output.contiguous(kChannelsLast);
    return;
  }
  at::Tensor grad_input_c;
  if (!grad_input.is_contiguous()) grad_input_c = at::empty(grad_input.sizes(), grad_input.options());
  const at::Tensor grad_output_c = grad_output.contiguous();
}

// The allocations of cpu's forward kernel beside `output` (interp: 1 nearest, 2 bilinear).
void MirrorForward(const at::Tensor& output, const at::Tensor& input, int interp) {
  if (CurrentKernelTarget().cuda()) return CardForward(output, input, interp == 2);
  if (input.scalar_type() == at::kByte) return;  // uint8 images take kernels of their own, not mirrored
  if (ChannelsLastKernel(output, input, interp == 2)) {
    const at::Tensor input_cl = input.contiguous(kChannelsLast);
    const at::Tensor output_cl = output.contiguous(kChannelsLast);
    return;
  }
  std::vector<at::Tensor> indices_weights;  // HelperInterp*::compute_indices_weights, per dimension
  for (int64_t dim = 2; dim < 4; ++dim) {
    std::vector<int64_t> shape(4, 1);
    shape[dim] = output.size(dim);
    for (int i = 0; i < interp; ++i) {
      indices_weights.push_back(at::empty(shape, input.options().dtype(at::kLong)));
      indices_weights.push_back(at::empty(shape, input.options()));
    }
  }
}

// cpu_upsample_{nearest,linear}_backward[_channels_last]: the contiguous copies it reads and writes.
void MirrorBackward(const at::Tensor& grad_input, const at::Tensor& grad_output) {
  if (CurrentKernelTarget().cuda()) return CardBackward(grad_input, grad_output);
  const at::MemoryFormat format =
      grad_output.is_contiguous(kChannelsLast) ? kChannelsLast : at::MemoryFormat::Contiguous;
  const at::Tensor grad_output_c = grad_output.contiguous(format);
  const at::Tensor grad_input_c = grad_input.contiguous(format);
}

at::Tensor UpsampleBilinear2dMeta(const at::Tensor& input, c10::SymIntArrayRef output_size, bool align_corners,
                                  std::optional<double> scales_h, std::optional<double> scales_w) {
  at::Tensor output = at::meta::upsample_bilinear2d_symint(input, output_size, align_corners, scales_h, scales_w);
  MirrorForward(output, input, 2);
  return output;
}

at::Tensor UpsampleNearest2dMeta(const at::Tensor& input, c10::SymIntArrayRef output_size,
                                 std::optional<double> scales_h, std::optional<double> scales_w) {
  at::Tensor output = at::meta::upsample_nearest2d_symint(input, output_size, scales_h, scales_w);
  MirrorForward(output, input, 1);
  return output;
}

at::Tensor UpsampleBilinear2dBackwardMeta(const at::Tensor& grad_output, c10::SymIntArrayRef output_size,
                                          c10::SymIntArrayRef input_size, bool align_corners,
                                          std::optional<double> scales_h, std::optional<double> scales_w) {
  at::Tensor grad_input = at::meta::upsample_bilinear2d_backward_symint(grad_output, output_size, input_size,
                                                                        align_corners, scales_h, scales_w);
  MirrorBackward(grad_input, grad_output);
  return grad_input;
}

at::Tensor UpsampleNearest2dBackwardMeta(const at::Tensor& grad_output, c10::SymIntArrayRef output_size,
                                         c10::SymIntArrayRef input_size, std::optional<double> scales_h,
                                         std::optional<double> scales_w) {
  at::Tensor grad_input =
      at::meta::upsample_nearest2d_backward_symint(grad_output, output_size, input_size, scales_h, scales_w);
  MirrorBackward(grad_input, grad_output);
  return grad_input;
}

}  // namespace

void RegisterResize(torch::Library& meta) {
  meta.impl("upsample_bilinear2d", TORCH_FN(UpsampleBilinear2dMeta));
  meta.impl("upsample_nearest2d", TORCH_FN(UpsampleNearest2dMeta));
  meta.impl("upsample_bilinear2d_backward", TORCH_FN(UpsampleBilinear2dBackwardMeta));
  meta.impl("upsample_nearest2d_backward", TORCH_FN(UpsampleNearest2dBackwardMeta));
}

}  // namespace oomguard::meta_kernels
