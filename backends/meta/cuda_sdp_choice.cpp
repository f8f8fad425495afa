#include "backends/meta/cuda_sdp_choice.h"

#include <ATen/Context.h>
#include <c10/util/env.h>

#include <algorithm>
#include <array>

namespace oomguard {
namespace {

// Note [The CUDA attention chooser on meta]
// PyTorch 2.11's select_sdp_backend (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp) reads the
// device's properties, which meta has none of; here the compute capability comes from the kernel
// target (Note [Meta as a card]) and the device-free checks are PyTorch's own: the inline filters of
// the installed ATen/native/transformers/sdp_utils_cpp.h (the 2.11 header itself) are called as they
// are. The sdp_utils.cpp rules are restated, each from the 2.11 source (and its messages, which the
// torch 2.11 libtorch_cuda.so holds: rules whose message it lacks were added after 2.11 and are left
// out, e.g. mem-efficient's storage-offset alignment and cuDNN's 1/16 dropout resolution):
//
// Order (priority_order, check_prefer_cudnn_attention): Context's default {flash, efficient, math,
//   cudnn} (ATen/Context.h sdp_priority_order), so cuDNN is never reached while math is enabled;
//   on sm_9x and sm_10x with cuDNN > 9.15.0 (the cu130 wheel pins cuDNN 9.19.0; a CUDA >= 13 build
//   does not look at the minor) and TORCH_CUDNN_SDPA_DEPRIORITIZED unset: {cudnn, flash, efficient,
//   math}.
// Flash (can_use_flash_attention): enabled (check_runtime_disabled_flash); 4-d q, k, v
//   (check_tensor_shapes); no attn_mask (check_for_attn_mask); q, k, v last dims equal and <= 256
//   (check_head_dim_size_flash: no multiple-of-8 rule, sdpa pads to it); sm_80..sm_121
//   (check_flash_attention_hardware_support); on sm_86..sm_89 and sm_120..sm_121 with grad: head dim
//   <= 192, or > 224 without dropout (check_requires_grad_and_head_dim_gt192_...); is_causal only with
//   seq_q == seq_k (check_flash_causal_non_square_seqlens); fp16 or bf16 (check_dtypes_flash_attention,
//   FA3 off by default); dense: equal batch, equal heads or GQA with enable_gqa
//   (check_batch_size_and_num_heads_dense<true>), nonzero sequence lengths, last-dim stride 1 (a head
//   dim of 1 aside). Dropout is allowed.
// Mem-efficient (can_use_mem_efficient_attention): enabled; sm_50..sm_121; 4-d; q and k last dims equal,
//   q's and v's last dims > 0 and multiples of minimum_gemm_alignment (sm_80+: 8 for fp16/bf16, 4 for
//   fp32; sm_75: 8 for fp16, 1 for fp32) (check_head_dim_size_mem_efficient); dense: nonzero sequence
//   lengths, last-dim stride 1 for q, k, v and the mask, equal batch and heads (no GQA:
//   check_batch_size_and_num_heads_dense<false>); dtypes fp16/fp32, plus bf16 from sm_80. Any mask and
//   dropout are allowed.
// cuDNN (can_use_cudnn_attention): no dropout on cuDNN 9.11-9.13 (not 9.19); enabled; 4-d; not in
//   deterministic mode (unless warn-only); fp16/bf16 (fp16 only below sm_80); a mask of shape
//   [L|1, S|1] or [B|1, H|1, L|1, S|1] that needs no grad (check_attn_mask_shape); sm_80..sm_121;
//   dense: nonzero sequence lengths, last-dim stride 1, equal batch and heads or GQA
//   (<true, false>); check_cudnn_tensor_shapes: head dims <= 128 (192/128 on sm_90/sm_10x; 256 needs
//   cuDNN > 9.22), multiples of 8, key length != 1, and query length != 1 with dropout.
// Math: whenever enabled.
// Nested tensors are not modelled (meta runs dense tensors only).
constexpr long kCudnnVersion = 91900;  // nvidia-cudnn-cu13==9.19.0.56, pinned by the torch 2.11.0 wheel

bool InRange(int cc, int low, int high) { return cc >= low && cc <= high; }

bool IsHalf(const sdp::sdp_params& p) {
  return p.query.scalar_type() == at::kHalf || p.query.scalar_type() == at::kBFloat16;
}

// sdp_utils.cpp minimum_gemm_alignment.
int64_t MinimumGemmAlignment(const sdp::sdp_params& p, int cc) {
  const bool is_half = IsHalf(p);
  const bool use_tc = cc >= 80 || (cc >= 70 && is_half);
  int64_t alignment = cc >= 80 ? 4 : 1;
  if (use_tc) alignment = std::max<int64_t>(alignment, 128 / (is_half ? 16 : 32));
  return alignment;
}

bool LowPrecisionDtypes(const sdp::sdp_params& p, int cc) {
  if (cc >= 80) return sdp::check_tensor_dtype(p, std::array<at::ScalarType, 2>{at::kHalf, at::kBFloat16}, false);
  return sdp::check_tensor_dtype(p, std::array<at::ScalarType, 1>{at::kHalf}, false);
}

bool CanUseFlash(const sdp::sdp_params& p, int cc) {
  if (!sdp::check_runtime_disabled_flash(p, false) || !sdp::check_tensor_shapes(p, false) ||
      !sdp::check_for_attn_mask(p, false))
    return false;
  const int64_t dq = p.query.size(-1), dk = p.key.size(-1), dv = p.value.size(-1);
  if (!(dq == dk && dq == dv && dq <= 256)) return false;  // check_head_dim_size_flash
  if (!InRange(cc, 80, 121)) return false;                   // check_flash_attention_hardware_support
  if (sdp::input_requires_grad(p) && (InRange(cc, 86, 89) || InRange(cc, 120, 121))) {
    const bool supported = dq <= 192 || (p.dropout <= 0.0 && dq > 224);
    if (!supported) return false;
  }
  if (p.is_causal && p.query.size(-2) != p.key.size(-2)) return false;  // check_flash_causal_non_square_seqlens
  if (!LowPrecisionDtypes(p, cc)) return false;                         // check_dtypes_flash_attention
  return sdp::check_batch_size_and_num_heads_dense<true>(p, false) &&
         sdp::check_nonzero_sequence_lengths_dense(p, false) &&
         sdp::check_last_dim_stride_equals_1_dense<true>(p, false);
}

bool CanUseMemEfficient(const sdp::sdp_params& p, int cc) {
  if (!sdp::check_runtime_disabled_mem_efficient(p, false) || !InRange(cc, 50, 121) ||
      !sdp::check_tensor_shapes(p, false))
    return false;
  const int64_t dq = p.query.size(-1), dk = p.key.size(-1), dv = p.value.size(-1);
  const int64_t alignment = MinimumGemmAlignment(p, cc);
  if (!(dq == dk && dq % alignment == 0 && dq > 0 && dv % alignment == 0 && dv > 0)) return false;
  if (!(sdp::check_nonzero_sequence_lengths_dense(p, false) &&
        sdp::check_last_dim_stride_equals_1_dense<false>(p, false) &&
        sdp::check_batch_size_and_num_heads_dense<false>(p, false)))
    return false;
  if (cc >= 80)
    return sdp::check_tensor_dtype(p, std::array<at::ScalarType, 3>{at::kHalf, at::kFloat, at::kBFloat16}, false);
  return sdp::check_tensor_dtype(p, std::array<at::ScalarType, 2>{at::kHalf, at::kFloat}, false);
}

bool CanUseCudnn(const sdp::sdp_params& p, int cc) {
  if (p.dropout > 0.0 && kCudnnVersion > 91100 && kCudnnVersion < 91400) return false;
  if (!at::globalContext().userEnabledCuDNNSDP() || !sdp::check_tensor_shapes(p, false)) return false;
  auto& ctx = at::globalContext();
  if (ctx.deterministicAlgorithms() && !ctx.deterministicAlgorithmsWarnOnly()) return false;
  if (!LowPrecisionDtypes(p, cc) || !sdp::check_attn_mask_shape(p, false) || !InRange(cc, 80, 121)) return false;
  if (!(sdp::check_nonzero_sequence_lengths_dense(p, false) &&
        sdp::check_last_dim_stride_equals_1_dense<true>(p, false) &&
        sdp::check_batch_size_and_num_heads_dense<true, false>(p, false)))
    return false;
  // check_cudnn_tensor_shapes
  const int64_t s_q = p.query.size(2), s_k = p.key.size(2), d_qk = p.query.size(3), d_v = p.value.size(3);
  const bool sm90_or_sm10x = cc == 90 || (cc >= 100 && cc < 110);
  int64_t head_dim_limit = 128;
  if (sm90_or_sm10x && kCudnnVersion >= 91100 && d_qk == 192 && d_v == 128) head_dim_limit = 192;
  if (d_qk > head_dim_limit || d_v > head_dim_limit) return false;
  if (d_qk % 8 != 0 || d_v % 8 != 0) return false;
  if (s_k == 1) return false;
  if (p.dropout != 0.0 && s_q == 1) return false;
  return true;
}

}  // namespace

std::array<at::SDPBackend, at::num_sdp_backends> CudaSdpPriorityOrder(int cc) {
  const int major = cc / 10;
  // check_prefer_cudnn_attention: cuDNN > 9.15.0 on major 9 or 10, unless deprioritized.
  static const bool deprioritized = c10::utils::check_env("TORCH_CUDNN_SDPA_DEPRIORITIZED") == true;
  if (!deprioritized && kCudnnVersion > 91500 && (major == 9 || major == 10)) {
    return {at::SDPBackend::cudnn_attention, at::SDPBackend::flash_attention, at::SDPBackend::efficient_attention,
            at::SDPBackend::math, at::SDPBackend::overrideable};
  }
  return at::globalContext().sDPPriorityOrder();
}

at::SDPBackend CudaSdpChoice(const sdp::sdp_params& params, int cc) {
  auto& ctx = at::globalContext();
  if (!ctx.userEnabledMathSDP() && !ctx.userEnabledFlashSDP() && !ctx.userEnabledMemEfficientSDP() &&
      !ctx.userEnabledCuDNNSDP())
    return at::SDPBackend::error;
  for (const at::SDPBackend backend : CudaSdpPriorityOrder(cc)) {
    switch (backend) {
      case at::SDPBackend::cudnn_attention:
        if (CanUseCudnn(params, cc)) return backend;
        break;
      case at::SDPBackend::flash_attention:
        if (CanUseFlash(params, cc)) return backend;
        break;
      case at::SDPBackend::efficient_attention:
        if (CanUseMemEfficient(params, cc)) return backend;
        break;
      case at::SDPBackend::math:
        if (ctx.userEnabledMathSDP()) return backend;
        break;
      default:
        break;
    }
  }
  return at::SDPBackend::error;
}

}  // namespace oomguard
