// Meta kernels for PyTorch's fused transformer fast path (nn.MultiheadAttention's and
// nn.TransformerEncoderLayer's forwards in evaluation under no_grad), which meta takes where cpu does
// (Note [Meta takes the attention fast path], nn/torchscript/meta_fast_path.h).
//
// Note [The fused attention ops run cpu's own code on meta]: cpu's kernels for
// _native_multi_head_attention and _transformer_encoder_layer_fwd (attention.cpp's
// native_multi_head_attention_cpu, transformer.cpp's transformer_encoder_layer_forward) compute nothing
// themselves: they call other ops (matmul, bmm, _softmax.out, addmm, layer_norm, ...) in an order that
// decides which tensor is alive when, and read only shapes to choose among them. Meta registers those
// same functions, so it makes cpu's calls, in cpu's order, on meta tensors; every op they call has a
// Meta kernel that mirrors cpu's. The two leaves that compute with data pointers get their own below.
// On a card the attention op and those two leaves are CUDA's (Note [The attention fast path on a card],
// meta_kernels_transformer_cuda.cpp).
#include <ATen/ATen.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <ATen/ops/split_native.h>

#include <optional>
#include <tuple>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

// cpu (transform_bias_rescale_qkv_cpu): the [3, B, heads, T, head_dim] result, then contiguous copies of
// qkv and the bias where they are not (alive while it fills the result), then q, k and v as views.
std::tuple<at::Tensor, at::Tensor, at::Tensor> TransformBiasRescaleQkvMeta(const at::Tensor& qkv,
                                                                           const at::Tensor& qkv_bias,
                                                                           int64_t num_heads) {
  if (CurrentKernelTarget().cuda()) return TransformBiasRescaleQkvCuda(qkv, qkv_bias, num_heads);
  TORCH_CHECK(qkv.dim() == 3, "_transform_bias_rescale_qkv expects a 3-D qkv");
  const int64_t batch = qkv.size(0), tokens = qkv.size(1), three_d = qkv.size(2), d = three_d / 3;
  TORCH_CHECK(d % num_heads == 0);
  TORCH_CHECK(three_d % 3 == 0);
  TORCH_CHECK(at::isFloatingType(qkv.scalar_type()), "\"transform_bias_rescale_qkv\" not implemented for '",
              qkv.scalar_type(), "'");
  const int64_t head_dim = d / num_heads;
  const at::Tensor q_k_v = at::empty({3, batch, num_heads, tokens, head_dim}, qkv.options());
  const c10::MaybeOwned<at::Tensor> qkv_contiguous = qkv.expect_contiguous();
  const c10::MaybeOwned<at::Tensor> bias_contiguous = qkv_bias.expect_contiguous();
  std::vector<at::Tensor> q_k_v_s = at::native::split(q_k_v.view({3 * batch, num_heads, tokens, head_dim}), batch, 0);
  return {q_k_v_s[0], q_k_v_s[1], q_k_v_s[2]};
}

// cpu (SoftMax.cpp's masked_softmax_cpu): the mask made contiguous, expanded to the input's shape (a
// copy) when a padding or attention mask is not applied along the last dim, then the output like the
// input, then a contiguous copy of the input where it is not.
at::Tensor MaskedSoftmaxMeta(const at::Tensor& input, const at::Tensor& mask_in, std::optional<int64_t> dim,
                             std::optional<int64_t> mask_type) {
  if (CurrentKernelTarget().cuda()) return MaskedSoftmaxCuda(input, mask_in, dim, mask_type);
  at::Tensor mask = mask_in.contiguous();
  TORCH_CHECK(mask_in.scalar_type() == at::kBool, "Mask should be a boolean tensor");
  if (mask.dim() != 2 || input.dim() != 4) mask_type = 2;  // types 0 and 1: 2-D masks of 4-D inputs only
  if (mask_type == 2) {
    TORCH_CHECK(input.sizes() == mask.sizes(), "For mask_type == 2 mask shape should match input shape");
  } else if (mask_type == 1) {
    TORCH_CHECK(input.size(0) == mask.size(0) && input.size(2) == mask.size(1),
                "For mask_type == 1 mask shape should be (B, L)");
    if (dim != input.dim() - 1) {  // two steps, as cpu: the first copy goes before the second is made
      mask = mask_in.view({input.size(0), 1, 1, input.size(2)});
      mask = mask.expand(input.sizes()).contiguous();
    }
  } else if (mask_type == 0) {
    TORCH_CHECK(mask.dim() == 2 && input.size(2) == mask.size(0) && input.size(2) == mask.size(1),
                "For mask_type == 0 mask shape should be (L, L)");
    if (dim != input.dim() - 1) {
      mask = mask.view({1, 1, input.size(2), input.size(2)});
      mask = mask.expand(input.sizes()).contiguous();
    }
  }
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), "\"masked_softmax\" not implemented for '", input.scalar_type(),
              "'");
  at::Tensor output = at::empty_like(input, input.options());
  const at::Tensor input_contiguous = input.contiguous();
  return output;
}

// cpu's native_multi_head_attention_cpu, or a card's native_multi_head_attention_cuda.
std::tuple<at::Tensor, at::Tensor> NativeMultiHeadAttentionMeta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  auto run =
      CurrentKernelTarget().cuda() ? &NativeMultiHeadAttentionCuda : &at::native::native_multi_head_attention_cpu;
  return run(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, need_weights,
             average_attn_weights, mask_type);
}

}  // namespace

void RegisterTransformer(torch::Library& meta) {
  meta.impl("_native_multi_head_attention", TORCH_FN(NativeMultiHeadAttentionMeta));
  meta.impl("_transformer_encoder_layer_fwd", TORCH_FN(at::native::transformer_encoder_layer_forward));
  meta.impl("_transform_bias_rescale_qkv", TORCH_FN(TransformBiasRescaleQkvMeta));
  meta.impl("_masked_softmax", TORCH_FN(MaskedSoftmaxMeta));
}

}  // namespace oomguard::meta_kernels
