// The fused transformer fast path (_native_multi_head_attention, and through it
// _transformer_encoder_layer_fwd) on meta as PyTorch 2.11's CUDA build runs it, when the kernel target is
// a card (Note [Meta as a card]); cpu's half is meta_kernels_transformer.cpp.
//
// Note [The attention fast path on a card]
// _transformer_encoder_layer_fwd is one function for cpu and CUDA (transformer.cpp's
// transformer_encoder_layer_forward): layer_norm, _native_multi_head_attention, addmm and
// _addmm_activation through the dispatcher, each of which has its card-mode kernel (layer norm's float
// statistics for fp16/bf16, the matrix products' operand copies), so meta runs it as it is.
// _native_multi_head_attention is not: CUDA's is attention.cu's native_multi_head_attention_cuda, which
// first tries scaled_dot_product_attention. When query, key and value are one tensor, the head dim is a
// multiple of 8, need_weights is false and no mask is given, and select_sdp_backend (here CudaSdpChoice
// at the card's capability, Note [The CUDA attention chooser on meta]) picks flash, mem-efficient or
// cuDNN for the [B, H, T, head_dim] views of the query, it runs:
//   x = linear(query, qkv_weight, qkv_bias)                  [B, T, 3D], alive to the end
//   y = scaled_dot_product_attention(x's three chunks, as [B, H, T, head_dim] views)
//                                                             the backend's output, logsumexp and scratch
//   past_sdp = y.transpose(1, 2).reshape(B, T, D)            a view: every backend's output is [B, T, H,
//                                                             head_dim] in memory (cuDNN's empty_like of
//                                                             the chunk keeps the chunk's dim order)
//   return linear(past_sdp, proj_weight, proj_bias), and no weights (an undefined tensor)
// Otherwise it runs the math path, the same code as native_multi_head_attention_cpu (qkv_projection,
// _transform_bias_rescale_qkv, bmm, the softmax, bmm into q's storage, transform_0213 and the
// projection, qkt.sum(1) for averaged weights), whose two data-reading leaves differ on CUDA:
// - transform_bias_rescale_qkv_cuda: the [3, B, heads, T, head_dim] result only (packed accessors
//   read qkv and the bias in place: no contiguous copies).
// - SoftMax.cu's masked_softmax_cuda: the output (empty_like the scores) first; then, where the
//   persistent kernel cannot run (more than 1024 keys, more than 4096 bytes a row, a mask that is not
//   contiguous, as a [T, T] mask expanded to the scores' shape is not past one batch item and head, or
//   a softmax along another dim), `softmax(input.masked_fill(mask, -inf), dim)`: a masked copy of the
//   scores and a new output, the first output freed only when that returns. A [B, T] padding mask on
//   the persistent kernel needs an even head count (its TORCH_CHECK is kept).
// Nested tensors are not modelled (meta runs dense tensors only; nn.TransformerEncoder's padded batches
// run padded, which the measurement says). Tests: tests/card_fast_path_test.cpp (bytes by hand),
// python/tests/test_fake_cuda_ops.py (the op's outputs against PyTorch's fake CUDA tensors).
#include <ATen/ATen.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/split_native.h>

#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "backends/meta/cuda_sdp_choice.h"
#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

// native_multi_head_attention_cuda's shape checks, in its order and with its messages (the math path
// repeats them: native_multi_head_attention_cpu makes the same ones).
void CheckMultiHeadAttentionArgs(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                 int64_t embed_dim, int64_t num_head, const at::Tensor& qkv_weight,
                                 const at::Tensor& qkv_bias) {
  const int64_t d = embed_dim;
  TORCH_CHECK(query.dim() == 3, "expected 3-D `query`, got ", query.dim(), "-D tensor");
  TORCH_CHECK(query.sizes()[2] == embed_dim, "passed-in embed_dim ", embed_dim, " didn't match last dim of query ",
              query.sizes()[2]);
  TORCH_CHECK(key.dim() == 3, "expected 3-D `key`, got ", key.dim(), "-D tensor");
  TORCH_CHECK(value.dim() == 3, "expected 3-D `value`, got ", value.dim(), "-D tensor");
  TORCH_CHECK(query.sizes() == key.sizes() && key.sizes() == value.sizes(),
              "expected `query`/`key`/`value` shapes to match");
  TORCH_CHECK(qkv_weight.dim() == 2, "expected 2-D `qkv_weight`, got ", qkv_weight.dim(), "-D tensor");
  TORCH_CHECK(d * 3 == qkv_weight.sizes()[0], "expected `qkv_weight` first dim to be 3x embed_dim");
  TORCH_CHECK(d == qkv_weight.sizes()[1], "expected `qkv_weight` second dim to be embed_Dim");
  TORCH_CHECK(qkv_bias.dim() == 1, "expected 1-D `qkv_bias`, got ", qkv_bias.dim(), "-D tensor");
  TORCH_CHECK(qkv_bias.sizes()[0] == 3 * d, "expected `qkv_bias` first dim and first dim of query to be equal");
  TORCH_CHECK(d % num_head == 0, "`embed_dim` must divide evenly by `num_heads`");
}

bool FusedBackend(at::SDPBackend b) {
  return b == at::SDPBackend::flash_attention || b == at::SDPBackend::efficient_attention ||
         b == at::SDPBackend::cudnn_attention;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> NativeMultiHeadAttentionCuda(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  CheckMultiHeadAttentionArgs(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias);
  const int64_t dim_per_head = embed_dim / num_head;
  if (query.is_same(key) && key.is_same(value) && dim_per_head % 8 == 0 && !need_weights) {
    // attention.cu: the chooser looks at views of the unprojected input (its mask included).
    const at::Tensor q = query.view({query.size(0), -1, num_head, dim_per_head}).transpose(1, 2);
    const at::Tensor k = key.view({key.size(0), -1, num_head, dim_per_head}).transpose(1, 2);
    const at::Tensor v = value.view({value.size(0), -1, num_head, dim_per_head}).transpose(1, 2);
    const sdp::sdp_params params{q, k, v, mask, 0.0, false, false};
    const at::SDPBackend backend = CudaSdpChoice(params, CurrentKernelTarget().compute_capability);
    if (!mask.has_value() && FusedBackend(backend)) {
      const at::Tensor x = at::linear(query, qkv_weight, qkv_bias);
      std::vector<at::Tensor> chunks = x.chunk(3, -1);
      const int64_t x_size_0 = x.size(0);
      for (at::Tensor& chunk : chunks) chunk = chunk.view({x_size_0, -1, num_head, dim_per_head}).transpose(1, 2);
      const at::Tensor y =
          ScaledDotProductAttentionCuda(chunks[0], chunks[1], chunks[2], mask, 0.0, false, std::nullopt, false);
      const at::Tensor past_sdp = y.transpose(1, 2).reshape({x_size_0, -1, embed_dim});
      return {at::linear(past_sdp, proj_weight, proj_bias), at::Tensor()};
    }
  }
  // The math path: attention.cu's is native_multi_head_attention_cpu's code (Note [The attention fast
  // path on a card]); its leaves run their card kernels below.
  return at::native::native_multi_head_attention_cpu(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
                                                     proj_weight, proj_bias, mask, need_weights, average_attn_weights,
                                                     mask_type);
}

// attention.cu transform_bias_rescale_qkv_cuda (dense input): the result, sized from the bias's 3D and in
// its dtype, split into q, k and v views.
std::tuple<at::Tensor, at::Tensor, at::Tensor> TransformBiasRescaleQkvCuda(const at::Tensor& qkv,
                                                                           const at::Tensor& qkv_bias,
                                                                           int64_t num_head) {
  TORCH_CHECK(qkv.dim() == 3, "_transform_bias_rescale_qkv expects a 3-D qkv");
  const int64_t batch = qkv.size(0), tokens = qkv.size(1), d = qkv_bias.size(0) / 3;
  TORCH_CHECK(d % num_head == 0);
  TORCH_CHECK(at::isFloatingType(qkv.scalar_type()), "\"transform_bias_rescale_qkv\" not implemented for '",
              qkv.scalar_type(), "'");
  const int64_t dim_per_head = d / num_head;
  const at::Tensor q_k_v = at::empty({3, batch, num_head, tokens, dim_per_head}, qkv_bias.options());
  std::vector<at::Tensor> q_k_v_s =
      at::native::split(q_k_v.view({3 * batch, num_head, tokens, dim_per_head}), batch, 0);
  return {q_k_v_s[0], q_k_v_s[1], q_k_v_s[2]};
}

// SoftMax.cu masked_softmax_cuda.
at::Tensor MaskedSoftmaxCuda(const at::Tensor& input_in, const at::Tensor& mask_in, std::optional<int64_t> dim_in,
                             std::optional<int64_t> mask_type_in) {
  at::Tensor output = at::empty_like(input_in, input_in.options());
  TORCH_CHECK(mask_in.scalar_type() == at::kBool, "Mask should be a boolean tensor");
  TORCH_CHECK(mask_type_in.has_value(), "Mask Type should be defined");
  const int64_t mask_type = *mask_type_in;
  TORCH_CHECK(mask_type == 0 || mask_type == 1 || mask_type == 2,
              "Mask Type should be 0 (src_mask), 1 (src_key_padding_mask), or 2 (default_mask)");
  const bool is_bxt_mask = mask_type == 1 && input_in.dim() == 4 && mask_in.dim() == 2 &&
                           input_in.size(0) == mask_in.size(0) && input_in.size(2) == mask_in.size(1) &&
                           input_in.size(3) == mask_in.size(1);
  const bool is_txt_mask = mask_type == 0 && input_in.dim() == 4 && mask_in.dim() == 2 &&
                           input_in.size(3) == mask_in.size(1) && input_in.size(2) == mask_in.size(0) &&
                           mask_in.size(0) == mask_in.size(1);
  TORCH_CHECK(mask_in.sizes() == input_in.sizes() || is_bxt_mask || is_txt_mask,
              "Mask shape should match input. mask: ", mask_in.sizes(), " input: ", input_in.sizes());
  const at::Tensor input = input_in.dim() == 0 ? input_in.view(1) : input_in;
  at::Tensor mask = mask_in.dim() == 0 ? mask_in.view(1) : mask_in;
  if (is_txt_mask) mask = mask.expand(input.sizes());
  const int64_t dim = dim_in.value_or(input.dim() - 1);
  const int64_t softmax_elements = input.size(dim);
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), "\"masked_softmax\" not implemented for '", input.scalar_type(),
              "'");
  if (softmax_elements > 1024 || softmax_elements * input.element_size() > 4096 || !mask.is_contiguous() ||
      dim < input.dim() - 1) {
    if (is_bxt_mask) mask = mask.view({mask_in.size(0), 1, 1, mask_in.size(1)}).expand(input.sizes());
    output = at::softmax(input.masked_fill(mask, -std::numeric_limits<double>::infinity()), dim);
    return output;
  }
  if (is_bxt_mask) TORCH_CHECK(input.size(1) % 2 == 0, "Only support when num_heads is even in transformer");
  return output;
}

}  // namespace oomguard::meta_kernels
