// A card's cuDNN convolutions on meta (`--kernels cuda`, Note [Meta as a card]): the convolution Meta
// kernels' (backends/meta/kernels/meta_kernels_conv.cpp) branch for a card's kernels.
#include "backends/meta/kernels/meta_kernels_conv_cudnn.h"

#include <ATen/ATen.h>
#include <ATen/native/ConvUtils.h>

#include <vector>

#include "backends/meta/kernel_target.h"

namespace oomguard::meta_kernels {
namespace {

// Note [cuDNN's workspace is not modelled]: a CUDA convolution runs cuDNN (Convolution.cpp's
// select_conv_backend: Cudnn / CudnnTranspose for float, half and bfloat16; CudaDepthwise2d's
// thnn_conv_depthwise2d allocates only its output too). Its tensors are the output (and in backward
// grad_input and grad_weight) in cudnn_conv_suggest_memory_format's format, after contiguous copies
// of the operands in it; no oneDNN buffers, no im2col columns. cuDNN's workspace, though, is what the
// algorithm cuDNN picks asks for (cudnnGet*WorkspaceSize, or benchmark mode's cudnnFind), from the
// caching allocator while the kernel runs: not knowable without cuDNN and the card. None is booked,
// and the run's warnings say so once.
constexpr const char* kCudnnWorkspaceWarning =
    "aten::convolution: cuDNN's workspace (from the caching allocator while each convolution runs; its size is "
    "the algorithm cuDNN picks on the card) is not modelled: none is booked";

}  // namespace

// cudnn_conv_suggest_memory_format (ConvUtils.h): channels last when either operand is, else contiguous.
at::MemoryFormat CudnnFormat(const at::Tensor& input, const at::Tensor& weight) {
  if (input.scalar_type() == at::kDouble || weight.scalar_type() == at::kDouble) return at::MemoryFormat::Contiguous;
  return input.suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
                 weight.suggest_memory_format() == at::MemoryFormat::ChannelsLast
             ? at::MemoryFormat::ChannelsLast
             : at::MemoryFormat::Contiguous;
}

// _convolution's Cudnn branch: input and weight contiguous in the format, then cudnn_convolution's
// output (cudnn_convolution_transpose's for a transposed one, shaped by conv_input_size); the bias is
// added in place.
at::Tensor CudnnForward(const at::Tensor& input, const at::Tensor& weight, const ConvParams& p) {
  NoteKernelWarning(kCudnnWorkspaceWarning);
  const at::MemoryFormat format = CudnnFormat(input, weight);
  const at::Tensor input_c = input.contiguous(format), weight_c = weight.contiguous(format);
  const std::vector<int64_t> sizes =
      p.transposed ? at::native::conv_input_size(input_c.sizes(), weight_c.sizes(), p.padding, p.output_padding,
                                                 p.stride, p.dilation, p.groups)
                   : at::native::conv_output_size(input_c.sizes(), weight_c.sizes(), p.padding, p.stride, p.dilation);
  return at::empty(sizes, input_c.options().memory_format(format));
}

// convolution_backward's Cudnn branch: grad_output, input and weight contiguous in the format, then
// grad_input and grad_weight in it; the bias gradient is summed from grad_output after.
std::tuple<at::Tensor, at::Tensor, at::Tensor> CudnnBackward(const at::Tensor& grad_output, const at::Tensor& input,
                                                             const at::Tensor& weight, std::array<bool, 3> mask) {
  NoteKernelWarning(kCudnnWorkspaceWarning);
  const at::MemoryFormat format = CudnnFormat(input, weight);
  const at::Tensor grad_output_c = grad_output.contiguous(format);
  const at::Tensor input_c = input.contiguous(format), weight_c = weight.contiguous(format);
  at::Tensor grad_input, grad_weight;
  if (mask[0]) grad_input = at::empty(input_c.sizes(), input_c.options().memory_format(format));
  if (mask[1]) grad_weight = at::empty(weight_c.sizes(), weight_c.options().memory_format(format));
  return {grad_input, grad_weight, at::Tensor()};
}

}  // namespace oomguard::meta_kernels
