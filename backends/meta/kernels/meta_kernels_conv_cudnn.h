// The cuDNN half of the convolution Meta kernels (backends/meta/kernels/meta_kernels_conv.cpp): what a card's
// CUDA build allocates for a convolution and its backward (Convolution.cpp's Cudnn and CudnnTranspose
// branches), used with a card's kernels (`--kernels cuda`, Note [Meta as a card]). cuDNN's own workspace
// is not booked: Note [cuDNN's convolution workspace on a card].
//
//   at::Tensor output = CudnnForward(input, weight, params);
//
// Error policy: LibTorch's (TORCH_CHECK), as every Meta kernel's.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <tuple>

#include "backends/meta/kernels/meta_kernels_conv_onednn.h"

namespace oomguard::meta_kernels {

// cudnn_conv_suggest_memory_format (ConvUtils.h): channels last when either operand is, else contiguous.
at::MemoryFormat CudnnFormat(const at::Tensor& input, const at::Tensor& weight);

// _convolution's Cudnn branch: the output (a transposed convolution's too), in cuDNN's memory format.
at::Tensor CudnnForward(const at::Tensor& input, const at::Tensor& weight, const ConvParams& p);

// convolution_backward's Cudnn branch: grad_input and grad_weight as `mask` asks; the bias gradient is
// the caller's to sum.
std::tuple<at::Tensor, at::Tensor, at::Tensor> CudnnBackward(const at::Tensor& grad_output, const at::Tensor& input,
                                                             const at::Tensor& weight, std::array<bool, 3> mask);

}  // namespace oomguard::meta_kernels
