// Batch norm and group norm on a card (`--kernels cuda`, Note [Meta as a card]): what PyTorch 2.11's
// CUDA kernels allocate, the transients they free on return included. meta_kernels_norm.cpp's Meta
// kernels call these when CurrentKernelTarget().cuda(); cpu's kernels stay there.
//
//   if (CurrentKernelTarget().cuda()) return GroupNormCuda(x, gamma, beta, n, c, hxw, group);
//
// Batch norm: meta_kernels_batch_norm_cuda.cpp (cuda/Normalization.cu, Normalization.cuh and
// cudnn/BatchNorm.cpp). Group norm: meta_kernels_group_norm_cuda.cpp (cuda/group_norm_kernel.cu).
// Undefined tensors stand for absent optional arguments, as in ATen's kernels.
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <array>
#include <tuple>

namespace oomguard::meta_kernels {

// Normalization.cpp _select_batch_norm_backend: whether a card runs cuDNN's batch norm for these
// arguments (cuDNN enabled, as torch.backends.cudnn.enabled defaults to).
bool TakesCudnnBatchNorm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                         const at::Tensor& running_mean, const at::Tensor& running_var, bool training, double eps);

// cudnn/BatchNorm.cpp cudnn_batch_norm: output, save_mean, save_var and the reserve space.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> CudnnBatchNorm(const at::Tensor& input,
                                                                          const at::Tensor& weight, bool training);
// cudnn_batch_norm_backward: grad_input, grad_weight, grad_bias.
std::tuple<at::Tensor, at::Tensor, at::Tensor> CudnnBatchNormBackward(const at::Tensor& input,
                                                                      const at::Tensor& grad_output,
                                                                      const at::Tensor& weight);

// cuda/Normalization.cu batch_norm_cuda (native_batch_norm on a card): output, save_mean, save_invstd.
std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormCuda(const at::Tensor& input, const at::Tensor& weight,
                                                             const at::Tensor& bias, const at::Tensor& running_mean,
                                                             const at::Tensor& running_var, bool train);
// batch_norm_backward_cuda: grad_input, grad_weight, grad_bias.
std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormBackwardCuda(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& running_mean,
    const at::Tensor& running_var, const at::Tensor& save_mean, const at::Tensor& save_invstd, bool train,
    std::array<bool, 3> mask);

// group_norm.cpp native_group_norm with group_norm_kernel.cu's GroupNormKernelImpl: Y, mean, rstd.
std::tuple<at::Tensor, at::Tensor, at::Tensor> GroupNormCuda(const at::Tensor& input, const at::Tensor& gamma,
                                                             const at::Tensor& beta, int64_t n, int64_t c, int64_t hxw,
                                                             int64_t group);
// native_group_norm_backward with GroupNormBackwardKernelImpl: dX, dgamma, dbeta.
std::tuple<at::Tensor, at::Tensor, at::Tensor> GroupNormBackwardCuda(const at::Tensor& grad_out,
                                                                     const at::Tensor& input, const at::Tensor& gamma,
                                                                     int64_t n, int64_t c, int64_t hxw, int64_t group,
                                                                     std::array<bool, 3> mask);

// cudnn_batch_norm and its backward on Meta, and _batch_norm_impl_index on AutogradMeta (the
// composite that picks cuDNN on a card and is cpu's own otherwise).
void RegisterBatchNormCuda(torch::Library& meta, torch::Library& autograd_meta);

}  // namespace oomguard::meta_kernels
