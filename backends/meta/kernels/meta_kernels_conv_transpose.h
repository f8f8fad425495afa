// The SlowTranspose2d half of the convolution Meta kernels (backends/meta/kernels/meta_kernels_conv.cpp): what
// cpu's slow_conv_transpose2d and its backward allocate for one group of a transposed convolution (cpu
// runs it where oneDNN is not used: float64, or shapes mkldnn refuses), in their order. Follows
// ATen/native/NaiveConvolutionTranspose2d.cpp; Convolution.cpp runs it group by group.
//
//   const at::MemoryFormat format = ...;  // thnn_conv_use_channels_last of input and weight
//   at::Tensor output = SlowTranspose2dForward(input, weight, p, format);
//
// Error policy: LibTorch's (TORCH_CHECK), as every Meta kernel's.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <tuple>

#include "backends/meta/kernels/meta_kernels_conv_onednn.h"

namespace oomguard::meta_kernels {

// slow_conv_transpose2d: the output, in `format`. weight: PyTorch's [i, o, kh, kw].
at::Tensor SlowTranspose2dForward(const at::Tensor& input, const at::Tensor& weight, const ConvParams& p,
                                  at::MemoryFormat format);

// slow_conv_transpose2d_backward: grad_input, grad_weight and grad_bias, each only when `mask` asks.
std::tuple<at::Tensor, at::Tensor, at::Tensor> SlowTranspose2dBackward(const at::Tensor& grad_output,
                                                                       const at::Tensor& input,
                                                                       const at::Tensor& weight, const ConvParams& p,
                                                                       std::array<bool, 3> mask,
                                                                       at::MemoryFormat format);

}  // namespace oomguard::meta_kernels
