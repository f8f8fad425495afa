// The oneDNN (ideep) half of the convolution Meta kernels (backends/meta/kernels/meta_kernels_conv.cpp): what cpu's
// Mkldnn and MkldnnTranspose backends allocate for a convolution, a transposed convolution and their
// backward, in their order, with the buffers oneDNN would want sized by asking oneDNN itself (Note
// [oneDNN on meta], backends/meta/onednn_query.h). Follows ATen/native/mkldnn/Conv.cpp with ideep's
// convolution and deconvolution (ideep/operators/conv.hpp, deconv.hpp); the two differ only in the
// primitive, the weights' [i, o, ...] order and the right padding.
//
//   const ConvParams p{stride, padding, dilation, groups, /*transposed=*/false, {}};  // after 1-d -> 2-d
//   at::Tensor output = MkldnnConvolution(input, weight, bias, p);
//
// Error policy: LibTorch's (TORCH_CHECK), as every Meta kernel's.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <tuple>
#include <vector>

namespace oomguard::meta_kernels {

// Convolution parameters after Convolution.cpp's 1-d -> 2-d expansion; output_padding only when
// transposed.
struct ConvParams {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  bool transposed = false;
  std::vector<int64_t> output_padding;
  std::vector<int64_t> OnednnDilates() const {  // oneDNN counts dilation from 0
    std::vector<int64_t> d = dilation;
    for (int64_t& x : d) --x;
    return d;
  }
  // mkldnn's padding_r: a transposed convolution's output_padding comes off the right padding.
  std::vector<int64_t> PaddingR() const {
    std::vector<int64_t> r = padding;
    for (size_t i = 0; i < output_padding.size(); ++i) r[i] -= output_padding[i];
    return r;
  }
};

// mkldnn_convolution, or mkldnn_convolution_transpose when p.transposed (weight: PyTorch's [i, o/g,
// ...]): the output, in cpu's memory format for these operands.
at::Tensor MkldnnConvolution(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                             const ConvParams& p);

// mkldnn_convolution(_transpose)_backward: grad_input, grad_weight and grad_bias, each only when `mask`
// asks.
std::tuple<at::Tensor, at::Tensor, at::Tensor> MkldnnConvolutionBackward(const at::Tensor& input,
                                                                         const at::Tensor& grad_output,
                                                                         const at::Tensor& weight, const ConvParams& p,
                                                                         std::array<bool, 3> mask);

}  // namespace oomguard::meta_kernels
