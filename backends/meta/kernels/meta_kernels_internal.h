// The families of Meta kernels beside the ones backends/meta/kernels/meta_kernels.cpp defines itself. Each adds its
// kernels to the libraries RegisterMetaKernels holds: `meta` for the Meta key, `autograd_meta` for
// the few CompositeImplicitAutograd ops whose cpu path depends on the device (there the kernel replaces
// the composite for meta tensors and redispatches, so autograd still records what it calls).
// Every kernel follows Note [Meta kernels mirror the cpu kernels' allocations] (meta_kernels.cpp).
#pragma once

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "backends/meta/cuda_reduce_config.h"

namespace oomguard::meta_kernels {

void RegisterNorm(torch::Library& meta, torch::Library& autograd_meta);       // meta_kernels_norm.cpp
void RegisterLayerNorm(torch::Library& meta);                                 // meta_kernels_layer_norm.cpp
void RegisterDropout(torch::Library& meta, torch::Library& autograd_meta);    // meta_kernels_dropout.cpp
void RegisterPool(torch::Library& meta, torch::Library& autograd_meta);       // meta_kernels_pool.cpp
void RegisterConv(torch::Library& meta);                                      // meta_kernels_conv.cpp
void RegisterAttention(torch::Library& meta, torch::Library& autograd_meta);  // meta_kernels_attention.cpp
void RegisterTransformer(torch::Library& meta);                               // meta_kernels_transformer.cpp
void RegisterResize(torch::Library& meta);                                    // meta_kernels_resize.cpp
void RegisterLoss(torch::Library& meta);                                      // meta_kernels_loss.cpp
void RegisterLossAutograd(torch::Library& autograd_meta);                     // meta_kernels_loss_autograd.cpp
void RegisterSoftmax(torch::Library& meta);                                   // meta_kernels_softmax.cpp
void RegisterPromote(torch::Library& meta, torch::Library& autograd_meta);    // meta_kernels_promote.cpp
void RegisterAttentionCuda(torch::Library& meta);                             // meta_kernels_attention_cuda.cpp
void RegisterMatmul(torch::Library& meta);                                    // meta_kernels_matmul.cpp
void RegisterReduce(torch::Library& meta);                                    // meta_kernels_reduce.cpp
void RegisterReduceOps(torch::Library& meta);                                 // meta_kernels_reduce_ops.cpp
void RegisterReduceMoments(torch::Library& meta);                             // meta_kernels_reduce_moments.cpp
void RegisterRecurrent(torch::Library& meta, torch::Library& autograd_meta);  // meta_kernels_recurrent.cpp

// On a card, what a Reduce.cuh reduction of `self` over `dim` into an `out_dtype` result allocates
// besides its result, freed before it returns: a cast copy of the input, and a block-split reduction's
// global scratch (Note [Reduce.cuh's global scratch], backends/meta/cuda_reduce_config.h). Call it after
// allocating the result, as the CUDA kernels run (meta_kernels_reduce.cpp).
void CudaReductionScratch(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::ScalarType out_dtype);
// make_reduction's input on a card: `self`, or its cast copy to the dtype the kernel reads.
at::Tensor CudaReductionInput(const at::Tensor& self, at::ScalarType out_dtype);
// gpu_reduce_kernel<scalar, out, vt0, input_vec_size> with an accumulator of `arg_size` bytes (sizeof(arg_t)).
ReduceKernel ReduceKernelOf(size_t arg_size, at::ScalarType scalar, int vt0, int input_vec_size);
// gpu_reduce_kernel's global scratch for `input`, as the kernel reads it, reduced over `dim` into outputs
// of `output_element_size` bytes: booked and freed before it returns, where the config splits the inputs
// across blocks (meta_kernels_reduce.cpp).
void CudaReduceKernelScratch(const at::Tensor& input, at::OptionalIntArrayRef dim, bool keepdim,
                             int64_t output_element_size, const ReduceKernel& kernel);
// The same for ReduceMomentKernel.cu's Welford reduction (var, std, var_mean, std_mean, batch norm's
// General statistics): WelfordData<acc_type, int32_t>, vt0 2 (meta_kernels_reduce_moments.cpp).
void CudaWelfordScratch(const at::Tensor& input, at::OptionalIntArrayRef dim, bool keepdim,
                        int64_t output_element_size);

// attention.cpp's convert_boolean_attn_mask: a bool mask becomes 0 where attending, -inf elsewhere.
std::optional<at::Tensor> ConvertBooleanMask(const std::optional<at::Tensor>& mask, caffe2::TypeMeta dtype);
// attention.cpp's pre_process_group_query_attention_input.
std::tuple<at::Tensor, at::Tensor> RepeatKeyValueHeads(const at::Tensor& query, const at::Tensor& key,
                                                       const at::Tensor& value, bool enable_gqa);
// _scaled_dot_product_attention_math as cpu and a card run it: fp16/bf16 computed in float
// (meta_kernels_attention.cpp).
at::Tensor AttentionMath(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         std::optional<at::Tensor> attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa);
// scaled_dot_product_attention as a card's CUDA build runs it (meta_kernels_attention_cuda.cpp).
at::Tensor ScaledDotProductAttentionCuda(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                                         std::optional<double> scale, bool enable_gqa);
// The fused attention fast path's card kernels (meta_kernels_transformer_cuda.cpp): attention.cu's
// native_multi_head_attention_cuda and transform_bias_rescale_qkv_cuda, SoftMax.cu's masked_softmax_cuda.
std::tuple<at::Tensor, at::Tensor> NativeMultiHeadAttentionCuda(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type);
std::tuple<at::Tensor, at::Tensor, at::Tensor> TransformBiasRescaleQkvCuda(const at::Tensor& qkv,
                                                                           const at::Tensor& qkv_bias,
                                                                           int64_t num_head);
at::Tensor MaskedSoftmaxCuda(const at::Tensor& input, const at::Tensor& mask, std::optional<int64_t> dim,
                             std::optional<int64_t> mask_type);

// The opmath dtype of `t` (float for bfloat16 and float16): what cpu kernels accumulate scratch in.
inline at::TensorOptions OpMathOptions(const at::Tensor& t) {
  return t.options().dtype(at::toOpMathType(t.scalar_type()));
}

}  // namespace oomguard::meta_kernels
