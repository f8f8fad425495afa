// Meta kernels for pooling where meta would allocate otherwise than cpu: adaptive average pooling
// to more than 1x1 (cpu: ATen/native/AdaptiveAveragePooling.cpp, cpu/AdaptiveAvgPoolKernel.cpp; no
// Meta kernel in LibTorch) and max_pool1d without gradients (MaxPooling.cpp: cpu computes the output
// alone, any other device goes through max_pool1d_with_indices and also allocates the int64 indices).
// max_pool2d, avg_pool2d and their backward are structured kernels whose Meta functions already
// allocate what cpu does. In card mode (Note [Meta as a card]) they follow Note [Pooling on a card].
#include <ATen/native/Pool.h>
#include <ATen/ops/adaptive_max_pool2d_backward_meta_dispatch.h>
#include <ATen/ops/adaptive_max_pool2d_meta_dispatch.h>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

// Note [Pooling on a card]
// What PyTorch 2.11's CUDA pooling kernels allocate beside the outputs the structured Meta functions
// make (in the input's suggested memory format), read from their host code:
// - max_pool2d_with_indices and its backward (DilatedMaxPool2d.cu), avg_pool2d and its backward
//   (AveragePool2d.cu): the input, grad_output and indices made contiguous in the input's suggested
//   format, as cpu's kernels do (cpu/MaxPoolKernel.cpp, cpu/AvgPoolKernel.cpp): no copies of tensors
//   already in it, the same bytes, no kernel here (a gradient in another format than its input's is
//   copied on both devices and mirrored on neither); max_pool2d itself is max_pool2d_with_indices on
//   every device (Pooling.cpp).
// - max_pool1d (MaxPooling.cpp): off the cpu it is always max_pool1d_with_indices, whose int64
//   indices a card allocates even without gradients.
// - adaptive_avg_pool2d to 1x1 is a mean over H and W on every device (AdaptiveAveragePooling.cpp),
//   so MeanDimMeta's card branch applies (no float32 copies for bf16/fp16). Beyond 1x1,
//   AdaptiveAveragePooling.cu's forward reads a channels-last input in place and makes a 4-d NCHW
//   input contiguous (a copy only when it is not); its backward zeroes grad_input like the input
//   (restrided to channels-last for a channels-last input) and makes grad_output contiguous only on the
//   NCHW path. cpu branches on grad_output's format and copies the side that does not match it.
// - adaptive_max_pool2d (AdaptiveMaxPooling2d.cu) works in NCHW only: for a channels-last output it
//   allocates contiguous output and indices to compute into and, for a 4-d input, input.contiguous()
//   (a full NCHW copy of a channels-last input), all freed after copying back; its backward makes
//   grad_output and indices contiguous and computes into a contiguous grad_input before copying back.
//   cpu's kernels read and write channels-last in place.
bool Card() { return CurrentKernelTarget().cuda(); }

// cpu (adaptive_avg_pool2d_cpu): the output, resized to [N,] C, oh, ow in the input's suggested
// format; the kernel reads the input contiguous in that format (a copy when it is not).
at::Tensor AdaptiveAvgPool2dMeta(const at::Tensor& input, c10::SymIntArrayRef output_size_sym) {
  const at::IntArrayRef output_size = C10_AS_INTARRAYREF_SLOW(output_size_sym);
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  TORCH_CHECK(input.dim() == 3 || input.dim() == 4, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ",
              input.sizes());
  const int64_t channels = input.size(-3);
  at::Tensor output;
  if (input.dim() == 3) {
    output = at::empty({channels, output_size[0], output_size[1]}, input.options());
  } else {
    output = at::empty({input.size(0), channels, output_size[0], output_size[1]},
                       input.options().memory_format(input.suggest_memory_format()));
  }
  if (Card()) {  // Note [Pooling on a card]: no copy of a channels-last input
    if (input.dim() == 4 && input.suggest_memory_format() == at::MemoryFormat::Contiguous) {
      const at::Tensor contiguous_input = input.contiguous();
    }
    return output;
  }
  if (output.numel() == 0) return output;
  at::Tensor contiguous_input = input.contiguous(input.suggest_memory_format());
  return output;
}

// cpu (adaptive_avg_pool2d_backward_cpu): grad_input like the input in its suggested format, zeroed;
// the kernel reads grad_output contiguous in grad_output's suggested format (and grad_input in it too,
// copying back when grad_input is not).
at::Tensor AdaptiveAvgPool2dBackwardMeta(const at::Tensor& grad_output, const at::Tensor& input) {
  at::Tensor grad_input = at::empty(input.sizes(), input.options().memory_format(input.suggest_memory_format()));
  if (Card()) {  // Note [Pooling on a card]: the input's format decides; only NCHW reads a contiguous grad
    if (grad_input.numel() != 0 && input.suggest_memory_format() == at::MemoryFormat::Contiguous) {
      const at::Tensor grad_output_contiguous = grad_output.contiguous();
    }
    return grad_input;
  }
  const at::MemoryFormat format = grad_output.suggest_memory_format();
  if (format == at::MemoryFormat::ChannelsLast) {
    at::Tensor grad_input_contiguous = grad_input.contiguous(format);
    at::Tensor grad_output_contiguous = grad_output.contiguous(format);
  } else {
    at::Tensor grad_output_contiguous = grad_output.contiguous();
    at::Tensor grad_input_contiguous = grad_input.contiguous();
  }
  return grad_input;
}

// max_pool1d for meta tensors (AutogradMeta): what cpu runs. With a gradient to compute that is
// max_pool1d_with_indices, as on every device; without one, cpu allocates the output only. A card
// always runs max_pool1d_with_indices (Note [Pooling on a card]).
at::Tensor MaxPool1dAutogradMeta(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  if ((self.requires_grad() && at::GradMode::is_enabled()) || self._fw_grad(/*level=*/0).defined() || Card()) {
    return std::get<0>(at::max_pool1d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode));
  }
  TORCH_CHECK(self.dim() == 2 || self.dim() == 3, "max_pool1d() Expected 2D or 3D input tensor, but got ",
              self.sizes());
  TORCH_CHECK(
      kernel_size.size() == 1 && (stride.empty() || stride.size() == 1) && padding.size() == 1 && dilation.size() == 1,
      "max_pool1d() expects one kernel size, stride, padding and dilation");
  const int64_t kw = kernel_size[0], sw = stride.empty() ? kw : stride[0];
  const int64_t ow =
      at::native::pooling_output_shape<int64_t>(self.size(-1), kw, padding[0], sw, dilation[0], ceil_mode);
  TORCH_CHECK(ow > 0, "max_pool1d() Invalid computed output size: ", ow);
  std::vector<int64_t> sizes = self.sizes().vec();
  sizes.back() = ow;
  return at::empty(sizes, self.options());
}

// adaptive_max_pool2d: the structured Meta function's output and indices (what cpu allocates), and on a
// card AdaptiveMaxPooling2d.cu's NCHW buffers (Note [Pooling on a card]).
std::tuple<at::Tensor, at::Tensor> AdaptiveMaxPool2dMeta(const at::Tensor& input, at::IntArrayRef output_size) {
  auto [output, indices] = at::meta::adaptive_max_pool2d(input, output_size);
  if (!Card() || input.numel() == 0) return {output, indices};
  at::Tensor output_c, indices_c, input_c;
  if (!output.is_contiguous()) output_c = at::empty(output.sizes(), output.options());
  if (!indices.is_contiguous()) indices_c = at::empty(indices.sizes(), indices.options());
  if (input.dim() == 4) input_c = input.contiguous();
  return {output, indices};
}

at::Tensor AdaptiveMaxPool2dBackwardMeta(const at::Tensor& grad_output, const at::Tensor& input,
                                         const at::Tensor& indices) {
  at::Tensor grad_input = at::meta::adaptive_max_pool2d_backward(grad_output, input, indices);
  if (!Card() || grad_output.numel() == 0) return grad_input;
  const at::Tensor grad_output_c = grad_output.contiguous();
  const at::Tensor indices_c = indices.contiguous();
  at::Tensor grad_input_c;
  if (!grad_input.is_contiguous()) grad_input_c = at::empty(grad_input.sizes(), grad_input.options());
  return grad_input;
}

}  // namespace

void RegisterPool(torch::Library& meta, torch::Library& autograd_meta) {
  meta.impl("_adaptive_avg_pool2d", TORCH_FN(AdaptiveAvgPool2dMeta));
  meta.impl("_adaptive_avg_pool2d_backward", TORCH_FN(AdaptiveAvgPool2dBackwardMeta));
  meta.impl("adaptive_max_pool2d", TORCH_FN(AdaptiveMaxPool2dMeta));
  meta.impl("adaptive_max_pool2d_backward", TORCH_FN(AdaptiveMaxPool2dBackwardMeta));
  autograd_meta.impl("max_pool1d", TORCH_FN(MaxPool1dAutogradMeta));
}

}  // namespace oomguard::meta_kernels
