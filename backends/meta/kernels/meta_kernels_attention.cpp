// at::scaled_dot_product_attention on meta as cpu runs it, and the where() its masks go through.
//
// Note [Which attention kernel each backend runs]: at::scaled_dot_product_attention asks
// _fused_sdp_choice_stub for a kernel only on devices the stub serves (cpu, cuda), so on meta it always
// takes the math path, while cpu (select_sdp_backend_cpp) takes
// _scaled_dot_product_flash_attention_for_cpu whenever the inputs allow it: no dropout, 4-D inputs,
// any bool or float mask of a broadcastable shape, causal or not; with dropout_p > 0 cpu takes
// _scaled_dot_product_attention_math too. The AutogradMeta kernel below asks cpu's own chooser
// (at::native::_fused_sdp_choice_cpp, which reads only shapes, strides and dtypes) and calls the same
// kernel, so meta keeps the tensors cpu keeps for backward. Flash's Meta kernel is in meta_kernels.cpp.
// When the kernel target is a card, CUDA's chooser and kernels are mirrored instead (Note [Attention
// kernels of a card on meta], meta_kernels_attention_cuda.cpp).
#include <ATen/SDPBackend.h>
#include <ATen/TensorIterator.h>
#include <ATen/ops/_fused_sdp_choice_native.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {

// attention.cpp's convert_boolean_attn_mask: a bool mask becomes 0 where attending, -inf elsewhere.
std::optional<at::Tensor> ConvertBooleanMask(const std::optional<at::Tensor>& mask, caffe2::TypeMeta dtype) {
  if (!mask.has_value() || mask->scalar_type() != at::kBool) return mask;
  return at::where(*mask, 0.0,
                   at::scalar_tensor(-std::numeric_limits<double>::infinity(),
                                     at::TensorOptions().dtype(dtype).device(mask->device())));
}

// attention.cpp's pre_process_group_query_attention_input.
std::tuple<at::Tensor, at::Tensor> RepeatKeyValueHeads(const at::Tensor& query, const at::Tensor& key,
                                                       const at::Tensor& value, bool enable_gqa) {
  if (!enable_gqa) return {key, value};
  const int64_t q_heads = query.size(-3), k_heads = key.size(-3), v_heads = value.size(-3);
  if (q_heads == k_heads && k_heads == v_heads) return {key, value};
  TORCH_CHECK(q_heads % k_heads == 0 && q_heads % v_heads == 0,
              "Number of heads in key and value must divide the number of heads in query");
  return {key.repeat_interleave(q_heads / k_heads, -3), value.repeat_interleave(q_heads / v_heads, -3)};
}

namespace {

// cpu (where_self_out): self and other cast to the result type, then a TensorIterator allocating the
// broadcast result. A 0-dim cpu operand stays on the host, as cpu's would.
at::Tensor& WhereOutMeta(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other,
                         at::Tensor& out) {
  const at::ScalarType result_type = at::result_type(self, other);
  TORCH_CHECK(out.scalar_type() == result_type, "Expected out type to be ", result_type, " but got ",
              out.scalar_type());
  const at::Tensor self_cast = self.scalar_type() != result_type ? self.to(result_type) : self;
  const at::Tensor other_cast = other.scalar_type() != result_type ? other.to(result_type) : other;
  const at::Tensor condition_bool = condition.scalar_type() == at::kByte ? condition.to(at::kBool) : condition;
  TORCH_CHECK(condition_bool.scalar_type() == at::kBool, "where expected condition to be a boolean tensor, but got a ",
              "tensor with dtype ", condition_bool.scalar_type());
  (void)at::TensorIteratorConfig()
      .check_all_same_dtype(false)
      .allow_cpu_scalars(true)
      .add_output(out)
      .add_const_input(condition_bool)
      .add_const_input(self_cast)
      .add_const_input(other_cast)
      .build();
  return out;
}

// cpu (where): an empty result of the promoted type that where_self_out's TensorIterator resizes to
// the broadcast shape. resize_ on meta books nothing, so here the iterator allocates the result itself.
at::Tensor WhereMeta(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const at::ScalarType result_type = at::result_type(self, other);
  const at::Tensor self_cast = self.scalar_type() != result_type ? self.to(result_type) : self;
  const at::Tensor other_cast = other.scalar_type() != result_type ? other.to(result_type) : other;
  const at::Tensor condition_bool = condition.scalar_type() == at::kByte ? condition.to(at::kBool) : condition;
  TORCH_CHECK(condition_bool.scalar_type() == at::kBool, "where expected condition to be a boolean tensor, but got a ",
              "tensor with dtype ", condition_bool.scalar_type());
  at::Tensor result;  // undefined: the iterator allocates it
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .check_all_same_dtype(false)
                                .declare_static_dtype(result_type)
                                .allow_cpu_scalars(true)
                                .add_output(result)
                                .add_const_input(condition_bool)
                                .add_const_input(self_cast)
                                .add_const_input(other_cast)
                                .build();
  return iter.output();
}

}  // namespace

// _scaled_dot_product_attention_math as it runs on cpu and on a card (attention.cpp, on every device): fp16/bf16
// inputs computed in float unless allowFP16BF16ReductionMathSDP, the output and the attention weights cast
// back (the weights' copy made and dropped, since sdpa keeps the output only). The composite itself adds the
// mask out of place for meta tensors (they count as subclass-like there), one more [.., L, S] tensor than
// cpu's add_.
//
// Note [The math attention computes in float on cpu too]: this mirror once kept cpu's bf16/fp16 inputs in
// their dtype (the float computation read as CUDA's alone); PyTorch 2.11's math path upcasts on every device,
// and cpu takes it for any dropout (its flash kernel refuses dropout_p > 0), so a bf16 BERT training with
// attention dropout peaked 4.5 MiB lower on meta than on cpu (Python, 2 layers, [4, 128] tokens), without a
// word. The profiler's aten::_to_copy events on cpu show the copies (tests/meta_op_bytes_test.cpp).
at::Tensor AttentionMath(const at::Tensor& query_in, const at::Tensor& key_in, const at::Tensor& value_in,
                         std::optional<at::Tensor> attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  const at::ScalarType origin = query_in.scalar_type();
  const auto accumulated = [](const at::Tensor& t) {
    const bool upcast = (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16) &&
                        !at::globalContext().allowFP16BF16ReductionMathSDP();
    return upcast ? t.to(at::kFloat) : t;
  };
  const at::Tensor query_acc = accumulated(query_in);
  const at::Tensor key = accumulated(key_in);
  const at::Tensor value = accumulated(value_in);
  const bool negative_scaling = scale.has_value() && *scale < 0.0;
  const double scaling_factor = std::sqrt(
      negative_scaling ? std::abs(*scale) : scale.value_or(1.0 / std::sqrt(double(query_acc.size(-1)))));
  const at::Tensor query = query_acc * (negative_scaling ? -scaling_factor : scaling_factor);
  if (is_causal) {
    TORCH_CHECK(!attn_mask.has_value(),
                "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
    attn_mask = at::ones({query.size(-2), key.size(-2)}, query.options().dtype(at::kBool)).tril();
    attn_mask = ConvertBooleanMask(attn_mask, query.dtype());
  }
  auto [key_expanded, value_expanded] = RepeatKeyValueHeads(query, key, value, enable_gqa);
  at::Tensor attn = at::matmul(query, key_expanded.transpose(-2, -1) * scaling_factor);
  if (attn_mask.has_value()) attn.add_(*attn_mask);
  attn = at::_safe_softmax(attn, -1);
  if (dropout_p > 0.0) attn = at::dropout(attn, dropout_p, true);
  // std::make_tuple(matmul(...).to(origin), attn.to(origin)): GCC, which builds PyTorch's wheels, evaluates the
  // arguments right to left, so the weights' copy is made first.
  const at::Tensor attn_origin = attn.to(origin);  // the second result, dropped by sdpa
  return at::matmul(attn, value_expanded).to(origin);
}

namespace {

// scaled_dot_product_attention for meta tensors (AutogradMeta): cpu's choice, cpu's mask conversion,
// cpu's kernel (Note [Which attention kernel each backend runs]).
at::Tensor ScaledDotProductAttentionAutogradMeta(const at::Tensor& query, const at::Tensor& key,
                                                 const at::Tensor& value, const std::optional<at::Tensor>& attn_mask_in,
                                                 double dropout_p, bool is_causal, std::optional<double> scale,
                                                 bool enable_gqa) {
  if (CurrentKernelTarget().cuda()) {  // Note [Attention kernels of a card on meta]
    return ScaledDotProductAttentionCuda(query, key, value, attn_mask_in, dropout_p, is_causal, scale, enable_gqa);
  }
  const auto backend = static_cast<at::SDPBackend>(
      at::native::_fused_sdp_choice_cpp(query, key, value, attn_mask_in, dropout_p, is_causal, scale, enable_gqa));
  const std::optional<at::Tensor> attn_mask = ConvertBooleanMask(attn_mask_in, query.dtype());
  switch (backend) {
    case at::SDPBackend::flash_attention:
      return std::get<0>(
          at::_scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal, attn_mask, scale));
    case at::SDPBackend::math:
      return AttentionMath(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
    default:
      TORCH_CHECK(false, "No viable backend for scaled_dot_product_attention was found.");
  }
}

}  // namespace

void RegisterAttention(torch::Library& meta, torch::Library& autograd_meta) {
  meta.impl("where.self", TORCH_FN(WhereMeta));
  meta.impl("where.self_out", TORCH_FN(WhereOutMeta));
  autograd_meta.impl("scaled_dot_product_attention", TORCH_FN(ScaledDotProductAttentionAutogradMeta));
  RegisterAttentionCuda(meta);  // meta_kernels_attention_cuda.cpp
}

}  // namespace oomguard::meta_kernels
