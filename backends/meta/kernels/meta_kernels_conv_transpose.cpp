#include "backends/meta/kernels/meta_kernels_conv_transpose.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>

#include <vector>

namespace oomguard::meta_kernels {
namespace {

std::vector<int64_t> OutputSizes(const at::Tensor& input, const at::Tensor& weight, const ConvParams& p) {
  std::vector<int64_t> sizes = {input.size(0), weight.size(1)};
  for (size_t d = 0; d < 2; ++d) {
    sizes.push_back((input.size(d + 2) - 1) * p.stride[d] - 2 * p.padding[d] +
                    p.dilation[d] * (weight.size(d + 2) - 1) + 1 + p.output_padding[d]);
  }
  return sizes;
}

// The backward's im2col is skipped for an unstrided, unpadded, undilated 1x1 kernel (the forward's
// columns are not).
bool NeedColumns(const at::Tensor& weight, const ConvParams& p) {
  return weight.size(2) != 1 || weight.size(3) != 1 || p.stride[0] != 1 || p.stride[1] != 1 || p.padding[0] != 0 ||
         p.padding[1] != 0 || p.dilation[0] != 1 || p.dilation[1] != 1;
}

// One sample's columns: [O*kh*kw, H*W], channels last [H*W, kh*kw*O].
at::Tensor SampleColumns(const at::Tensor& input, const at::Tensor& weight, at::MemoryFormat format) {
  const int64_t patch = weight.size(1) * weight.size(2) * weight.size(3), pixels = input.size(2) * input.size(3);
  return format == at::MemoryFormat::ChannelsLast ? at::empty({pixels, patch}, input.options())
                                                  : at::empty({patch, pixels}, input.options());
}

}  // namespace

// The structured kernel's meta function makes the input contiguous (a copy that dies) before the
// output; the kernel then makes input, weight and bias contiguous and the whole batch's columns
// [N, O*kh*kw, H*W] (channels last [N, H*W, kh*kw*O]), and adds the bias in place.
at::Tensor SlowTranspose2dForward(const at::Tensor& input_t, const at::Tensor& weight_t, const ConvParams& p,
                                  at::MemoryFormat format) {
  (void)input_t.contiguous(format);
  at::Tensor output = at::empty(OutputSizes(input_t, weight_t, p), input_t.options().memory_format(format));
  const at::Tensor input = input_t.contiguous(format), weight = weight_t.contiguous(format);
  const int64_t patch = weight.size(1) * weight.size(2) * weight.size(3), pixels = input.size(2) * input.size(3);
  const at::Tensor columns = format == at::MemoryFormat::ChannelsLast
                                 ? at::empty({input.size(0), pixels, patch}, input.options())
                                 : at::empty({input.size(0), patch, pixels}, input.options());
  return output;
}

// grad_input (after input, grad_output and weight contiguous in the format) with one sample's columns;
// grad_bias summed from grad_output; grad_weight in the weight's format, with input and grad_output
// contiguous and one sample's columns again.
std::tuple<at::Tensor, at::Tensor, at::Tensor> SlowTranspose2dBackward(const at::Tensor& grad_output_t,
                                                                       const at::Tensor& input_t,
                                                                       const at::Tensor& weight_t, const ConvParams& p,
                                                                       std::array<bool, 3> mask,
                                                                       at::MemoryFormat format) {
  const bool need_columns = NeedColumns(weight_t, p);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) {
    const at::Tensor input = input_t.contiguous(format), grad_output = grad_output_t.contiguous(format);
    const at::Tensor weight = weight_t.contiguous(format);
    grad_input = at::empty(input.sizes(), input.options().memory_format(format));
    at::Tensor columns;
    if (need_columns) columns = SampleColumns(input, weight, format);
  }
  if (mask[2]) grad_bias = at::sum(grad_output_t, {0, 2, 3});
  if (mask[1]) {
    grad_weight = at::empty(weight_t.sizes(), weight_t.options().memory_format(weight_t.suggest_memory_format()));
    const at::Tensor input = input_t.contiguous(format), grad_output = grad_output_t.contiguous(format);
    at::Tensor columns;
    if (need_columns) columns = SampleColumns(input, weight_t, format);
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace oomguard::meta_kernels
