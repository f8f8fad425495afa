// The oneDNN (ideep) half of the convolution Meta kernels (backends/meta/meta_kernels_conv.cpp): what cpu's
// Mkldnn backend allocates for a convolution and its backward, in its order, with the buffers oneDNN
// would want sized by asking oneDNN itself (Note [oneDNN on meta], backends/meta/onednn_query.h). Follows
// ATen/native/mkldnn/Conv.cpp with ideep's convolution (ideep/operators/conv.hpp).
//
//   const ConvParams p{stride, padding, dilation, groups};  // after the 1-d -> 2-d expansion
//   at::Tensor output = MkldnnConvolution(input, weight, bias, p);
//
// Error policy: LibTorch's (TORCH_CHECK), as every Meta kernel's.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <tuple>
#include <vector>

namespace oomguard::meta_kernels {

// Convolution parameters after Convolution.cpp's 1-d -> 2-d expansion.
struct ConvParams {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  std::vector<int64_t> OnednnDilates() const {  // oneDNN counts dilation from 0
    std::vector<int64_t> d = dilation;
    for (int64_t& x : d) --x;
    return d;
  }
};

// mkldnn_convolution: the output, in cpu's memory format for these operands.
at::Tensor MkldnnConvolution(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                             const ConvParams& p);

// mkldnn_convolution_backward: grad_input, grad_weight and grad_bias, each only when `mask` asks.
std::tuple<at::Tensor, at::Tensor, at::Tensor> MkldnnConvolutionBackward(const at::Tensor& input,
                                                                         const at::Tensor& grad_output,
                                                                         const at::Tensor& weight, const ConvParams& p,
                                                                         std::array<bool, 3> mask);

}  // namespace oomguard::meta_kernels
