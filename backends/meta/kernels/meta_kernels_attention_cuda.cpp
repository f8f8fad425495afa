// scaled_dot_product_attention on meta as PyTorch 2.11's CUDA build runs it (the kernel target is a
// card: Note [Meta as a card]): the backend CudaSdpChoice picks (Note [The CUDA attention chooser on
// meta]), then that backend's op, whose Meta kernels below make the allocations the CUDA kernels make.
//
// Note [Attention kernels of a card on meta]: LibTorch's C++ build has no Meta kernel for
// _scaled_dot_product_flash_attention, _scaled_dot_product_efficient_attention,
// _scaled_dot_product_cudnn_attention or their backward ops (torch/_meta_registrations.py gives Python
// their shapes only). Each kernel here makes the CUDA path's allocations, in its order, each naming the
// function of the 2.11 source it mirrors (aten/src/ATen/native/transformers/attention.cpp for sdpa's
// own steps, cuda/attention.cu and cuda/attention_backward.cu for the ops, cuda/flash_attn/flash_api.cpp
// for flash's mha_fwd/mha_bwd, the installed cuda/mem_eff_attention/kernel_{forward,backward}.h and
// kernels/cutlass{F,B}.h for the memory-efficient kernels' buffers, native/cudnn/MHA.cpp for cuDNN).
// Tensors CUDA keeps on the host (mem-efficient's philox seed and offset, outside graph capture) are
// made on the cpu, so the meta ledger never sees them; flash's rng_state lives on the card, so it is a
// meta tensor here. Not mirrored: cuDNN's own workspace (cudnn_frontend's graph asks cuDNN for it at run
// time) and cuDNN's bias padding; the mem-efficient backward kernel is the first of cutlassB's list
// whose head-dim, dropout and sequence-alignment limits fit (shared-memory limits are modelled only as
// "no 128x128 tile on the 99 KiB cards sm_86/sm_89/sm_12x").
#include <ATen/Context.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <vector>

#include "backends/meta/cuda_sdp_choice.h"
#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t CeilDiv(int64_t x, int64_t m) { return (x + m - 1) / m; }
int TargetCc() { return CurrentKernelTarget().compute_capability; }

bool DeterministicOnly() {
  auto& ctx = at::globalContext();
  return ctx.deterministicAlgorithms() && !ctx.deterministicAlgorithmsWarnOnly();
}

// flash_api.cpp num_splits_heuristic: the split-KV forward's splits for an inference-size problem.
int NumSplitsHeuristic(int batch_nheads_mblocks, int num_sms, int num_n_blocks, int max_splits) {
  if (batch_nheads_mblocks >= 0.8f * num_sms) return 1;
  max_splits = std::min({max_splits, num_sms, num_n_blocks});
  float max_efficiency = 0.f;
  std::vector<float> efficiency;
  auto ceildiv = [](int a, int b) { return (a + b - 1) / b; };
  auto eligible = [&](int s) { return s == 1 || ceildiv(num_n_blocks, s) != ceildiv(num_n_blocks, s - 1); };
  for (int s = 1; s <= max_splits; ++s) {
    if (!eligible(s)) {
      efficiency.push_back(0.f);
      continue;
    }
    const float n_waves = static_cast<float>(batch_nheads_mblocks * s) / num_sms;
    const float eff = n_waves / std::ceil(n_waves);
    max_efficiency = std::max(max_efficiency, eff);
    efficiency.push_back(eff);
  }
  for (int s = 1; s <= max_splits; ++s) {
    if (eligible(s) && efficiency[s - 1] >= 0.85 * max_efficiency) return s;
  }
  return 1;
}

// _scaled_dot_product_flash_attention_cuda (attention.cu) -> _flash_attention_forward -> mha_fwd
// (flash_api.cpp), on q, k, v transposed to [B, S, H, D].
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
FlashAttentionCudaMeta(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, double dropout_p,
                       bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "_scaled_dot_product_flash_attention: expected 4-d query, key and value");
  TORCH_CHECK(query.scalar_type() == at::kHalf || query.scalar_type() == at::kBFloat16,
              "FlashAttention only support fp16 and bf16 data type");
  TORCH_CHECK(key.size(2) == value.size(2), "Key and Value must have the same sequence length");
  const int64_t batch = query.size(0), heads_og = query.size(1), seqlen_q_og = query.size(2);
  const int64_t head_size_og = query.size(3), seqlen_k = key.size(2), heads_k = key.size(1);
  TORCH_CHECK(head_size_og % 8 == 0, "head_size must be a multiple of 8, this is ensured by padding!");
  const at::Tensor q_t = query.transpose(1, 2);
  // mha_fwd: seqlen_q == 1 makes causal plain; GQA decoding swaps query heads into the sequence.
  const bool causal = is_causal && seqlen_q_og != 1;
  const bool swapped = seqlen_q_og == 1 && heads_og > heads_k && !causal && dropout_p == 0.0 && head_size_og % 8 == 0;
  int64_t seqlen_q = seqlen_q_og, heads = heads_og;
  at::Tensor temp_q = q_t;
  if (swapped) {
    temp_q = q_t.reshape({batch, heads_k, heads_og / heads_k, head_size_og}).transpose(1, 2);
    seqlen_q = heads_og / heads_k;
    heads = heads_k;
  }
  at::Tensor out = at::empty_like(temp_q);  // mha_fwd: out = at::empty_like(q_padded)
  const int64_t head_size = RoundUp(head_size_og, 8);
  const int64_t head_size_rounded = RoundUp(head_size, head_size <= 128 ? 32 : 64);
  const auto opts = query.options();
  at::Tensor softmax_lse = at::empty({batch, heads, seqlen_q}, opts.dtype(at::kFloat));
  at::Tensor p;  // mha_fwd: the softmax, returned only for return_softmax (with dropout)
  if (return_debug_mask) {
    TORCH_CHECK(dropout_p > 0.0, "return_softmax is only supported when p_dropout > 0.0");
    p = at::empty({batch, heads, RoundUp(seqlen_q, 128), RoundUp(seqlen_k, 128)}, opts);
  }
  // set_params_splitkv: without dropout an inference-size problem splits the keys across the SMs and
  // keeps float partial results until the kernel returns.
  at::Tensor softmax_lse_accum, out_accum;
  if (dropout_p == 0.0) {
    const int64_t block_n = head_size <= 64 ? 256 : (head_size <= 128 ? 128 : 64);
    const int num_splits = NumSplitsHeuristic(static_cast<int>(batch * heads * CeilDiv(seqlen_q, 64)),
                                              CurrentKernelTarget().device.sm_count * 2,
                                              static_cast<int>(CeilDiv(seqlen_k, block_n)), 128);
    if (num_splits > 1) {
      softmax_lse_accum = at::empty({num_splits, batch, heads, seqlen_q}, opts.dtype(at::kFloat));
      out_accum = at::empty({num_splits, batch, heads, seqlen_q, head_size_rounded}, opts.dtype(at::kFloat));
    }
  }
  // mha_fwd: rng_state [2] and _unused [] as uint64 on the card; with dropout rng_state is made again.
  at::Tensor rng_state = at::empty({2}, opts.dtype(at::kUInt64));
  at::Tensor unused = at::empty({}, opts.dtype(at::kUInt64));
  if (dropout_p > 0.0) rng_state = at::empty({2}, opts.dtype(at::kUInt64));
  softmax_lse_accum.reset();
  out_accum.reset();
  if (swapped) {
    out = out.transpose(1, 2).reshape({batch, 1, heads_k * seqlen_q, head_size_og});
    softmax_lse = softmax_lse.reshape({batch, heads_k * seqlen_q, 1});
  }
  // _flash_attention_forward: an empty debug mask unless asked for.
  at::Tensor debug_attn_mask = return_debug_mask ? p : at::empty({0}, opts);
  return {out.transpose(1, 2), softmax_lse, at::Tensor(), at::Tensor(), c10::SymInt(seqlen_q_og),
          c10::SymInt(seqlen_k), rng_state, unused, debug_attn_mask};
}

// _scaled_dot_product_flash_attention_backward_cuda -> _flash_attention_backward -> mha_bwd.
std::tuple<at::Tensor, at::Tensor, at::Tensor> FlashAttentionBackwardCudaMeta(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k,
    c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal, const at::Tensor& philox_seed,
    const at::Tensor& philox_offset, std::optional<double> scale) {
  if (!grad_out.defined()) return {};
  const at::Tensor q_t = query.transpose(1, 2), k_t = key.transpose(1, 2), v_t = value.transpose(1, 2);
  // _flash_attention_backward: "CUDA code assumes that dout is contiguous".
  const at::Tensor grad_out_contiguous = grad_out.transpose(1, 2).contiguous();
  const at::Tensor out_contiguous = out.transpose(1, 2).contiguous();
  const int64_t batch = q_t.size(0), seqlen_q = q_t.size(1), heads = q_t.size(2), head_size = q_t.size(3);
  const int64_t seqlen_k = k_t.size(1), heads_k = k_t.size(2);
  // mha_bwd: the three gradients like q, k, v ([B, S, H, D]).
  at::Tensor dq = at::empty_like(q_t), dk = at::empty_like(k_t), dv = at::empty_like(v_t);
  const int64_t head_size_rounded = RoundUp(head_size, head_size <= 128 ? 32 : 64);
  const int64_t seqlen_q_rounded = RoundUp(seqlen_q, 128);
  const auto opts = query.options();
  // mha_bwd: softmax_d [B, H, round128(S_q)] float, then dq_accum in float.
  const at::Tensor softmax_d = at::empty({batch, heads, seqlen_q_rounded}, opts.dtype(at::kFloat));
  at::Tensor dq_accum;
  if (!DeterministicOnly()) {
    dq_accum = at::empty({batch, seqlen_q_rounded, heads, head_size_rounded}, opts.dtype(at::kFloat));
  } else {
    const int64_t nsplits = CeilDiv(CurrentKernelTarget().device.sm_count, batch * heads);
    dq_accum = at::zeros({nsplits, batch, seqlen_q_rounded, heads, head_size_rounded}, opts.dtype(at::kFloat));
  }
  // mha_bwd, MQA/GQA: dK and dV over all query heads, summed into dk and dv afterwards (sum_out into the
  // existing dk, dv: no allocation).
  at::Tensor dk_expanded, dv_expanded;
  if (heads_k != heads) {
    dk_expanded = at::empty({batch, seqlen_k, heads, head_size}, opts);
    dv_expanded = at::empty({batch, seqlen_k, heads, head_size}, opts);
  }
  return {dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)};
}

// The mem-efficient CUTLASS kernels' tile parameters (kernel_forward.h / kernel_backward.h).
struct BackwardKernel {
  bool dropout;
  int64_t block_i, block_j, max_k;
  bool seq_aligned;
};

// kernels/cutlassB.h: dispatch_cutlassB's list for the dtype and capability (the aligned kernels;
// chooser-approved inputs are aligned), and _efficient_attention_backward's launchKernel filter.
BackwardKernel ChooseBackwardKernel(at::ScalarType dtype, int cc, int64_t max_k, bool use_dropout, int64_t m,
                                    int64_t n) {
  const bool half = dtype == at::kHalf || dtype == at::kBFloat16;
  const bool small_shmem = cc == 86 || cc == 87 || cc == 89 || cc >= 120;  // 99 KiB per block
  std::vector<BackwardKernel> list;
  if (half && cc >= 80) {
    list = {{false, 64, 64, 32, true},   {false, 64, 64, 32, false},  {false, 64, 64, 64, true},
            {false, 64, 64, 64, false}};
    if (cc == 86 || cc == 89) list.push_back({false, 128, 64, 96, false});
    list.insert(list.end(), {{false, 128, 128, 128, true}, {false, 128, 128, 128, false}, {false, 64, 64, 128, true},
                             {false, 64, 64, 128, false},  {false, 128, 64, 65536, false}, {false, 64, 64, 65536, false},
                             {true, 64, 64, 32, false},    {true, 64, 64, 64, false},     {true, 128, 128, 128, false},
                             {true, 64, 64, 128, false},   {true, 128, 64, 65536, false}, {true, 64, 64, 65536, false}});
  } else if (cc >= 80 || (half && cc >= 75)) {  // f32 sm80+, f16 sm75
    list = {{false, 64, 64, 32, false},    {false, 64, 64, 64, false},   {false, 128, 64, 128, false},
            {false, 64, 64, 128, false},   {false, 128, 64, 65536, false}, {false, 64, 64, 65536, false},
            {true, 64, 64, 32, false},     {true, 64, 64, 64, false},    {true, 128, 64, 128, false},
            {true, 64, 64, 128, false},    {true, 128, 64, 65536, false}, {true, 64, 64, 65536, false}};
  } else {  // f32 sm75
    list = {{false, 64, 64, 32, false}, {false, 64, 64, 64, false}, {false, 64, 64, 128, false},
            {false, 64, 64, 65536, false}, {true, 64, 64, 32, false}, {true, 64, 64, 64, false},
            {true, 64, 64, 128, false},    {true, 64, 64, 65536, false}};
  }
  for (const BackwardKernel& k : list) {
    if (k.max_k < max_k) continue;
    if (use_dropout && !k.dropout) continue;
    if (k.seq_aligned && (m % k.block_i != 0 || n % k.block_j != 0)) continue;
    if (small_shmem && k.block_i == 128 && k.block_j == 128) continue;
    return k;
  }
  TORCH_CHECK(false, "cutlassB: no kernel found to launch!");
}

// _scaled_dot_product_efficient_attention_cuda -> _efficient_attention_forward, on [B, S, H, D].
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> EfficientAttentionCudaMeta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& attn_bias,
    bool compute_log_sumexp, double dropout_p, bool is_causal, std::optional<double> scale) {
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "_scaled_dot_product_efficient_attention: expected 4-d query, key and value");
  const at::Tensor q_t = query.transpose(1, 2), v_t = value.transpose(1, 2);
  const int64_t batch = q_t.size(0), m = q_t.size(1), heads = q_t.size(2), k = q_t.size(3), kv = v_t.size(3);
  // _efficient_attention_forward: seed and offset stay on the host outside graph capture.
  const at::Tensor seed = at::empty({}, at::dtype(at::kLong));
  const at::Tensor offset = at::empty({}, at::dtype(at::kLong));
  // launchKernel: res [B, M, H, Kv]; logsumexp [B, H, M rounded up to kAlignLSE = 32] when asked for.
  at::Tensor res = at::empty({batch, m, heads, kv}, query.options());
  at::Tensor logsumexp =
      at::empty({batch, heads, compute_log_sumexp ? CeilDiv(m, 32) * 32 : 0}, query.options().dtype(at::kFloat));
  // kNeedsOutputAccumulatorBuffer: fp16/bf16 past the register-file kernels (head dim > 128, cutlassF's
  // 32x128 gmem kernel) accumulate the output in a float buffer freed when the kernel returns.
  const bool half = query.scalar_type() == at::kHalf || query.scalar_type() == at::kBFloat16;
  if (half && std::max(k, kv) > 128) {
    const at::Tensor output_accum = at::empty({batch, m, heads, kv}, query.options().dtype(at::kFloat));
  }
  return {res.transpose(1, 2), logsumexp, seed, offset};
}

// _scaled_dot_product_efficient_attention_backward_cuda -> _efficient_attention_backward.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> EfficientAttentionBackwardCudaMeta(
    const at::Tensor& grad_out_in, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& philox_seed,
    const at::Tensor& philox_offset, double dropout_p, std::array<bool, 4> grad_input_mask, bool is_causal,
    std::optional<double> scale) {
  if (!grad_out_in.defined()) return {};
  const at::Tensor q_t = query.transpose(1, 2), k_t = key.transpose(1, 2), v_t = value.transpose(1, 2);
  const at::Tensor out_t = out.transpose(1, 2);
  // _efficient_attention_backward: a non-contiguous grad_out is copied.
  const at::Tensor grad_out = grad_out_in.transpose(1, 2).contiguous();
  const int64_t batch = q_t.size(0), m = q_t.size(1), n = k_t.size(1), heads = q_t.size(2);
  const int64_t k = q_t.size(3), kv = v_t.size(3);
  at::Tensor grad_q = at::empty(q_t.sizes(), q_t.options());
  at::Tensor grad_k = at::empty(k_t.sizes(), k_t.options());
  at::Tensor grad_v = at::empty(v_t.sizes(), v_t.options());
  at::Tensor grad_bias;
  if (grad_input_mask[3] && attn_bias.defined()) {
    // "force alignment for the last dim": the last dim rounded up to 16, sliced back.
    std::vector<int64_t> sizes = attn_bias.sizes().vec();
    const int64_t last = sizes.back();
    sizes.back() = RoundUp(last, 16);
    grad_bias = at::empty(sizes, attn_bias.options()).slice(-1, 0, last);
  }
  const bool use_dropout = dropout_p != 0.0;
  const int cc = TargetCc();
  const BackwardKernel kernel = ChooseBackwardKernel(query.scalar_type(), cc, std::max(k, kv), use_dropout, m, n);
  const bool half = query.scalar_type() == at::kHalf || query.scalar_type() == at::kBFloat16;
  const bool output_in_rf = half && kernel.max_k <= kernel.block_i;  // kOutputInRF
  // launchKernel: delta [B, H, M] float, computed by the kernel for fp16/bf16 (kKernelComputesDelta off
  // sm_70), else (grad_out * out).sum(-1) in float, transposed and made contiguous.
  const at::Tensor delta =
      half ? at::empty({batch, heads, m}, query.options().dtype(at::kFloat))
           : (grad_out.to(at::kFloat) * out_t.to(at::kFloat)).sum(-1).transpose(-2, -1).contiguous();
  // Params::workspace_size (kernel_backward.h): per batch and head, gK and gV staging (fp16/bf16 kernels
  // whose output is not in registers) for each key split, and dQ's GradQTempStorage per (query block,
  // column block): a 16-byte header and a float tile of kBlockSizeI x kBlockSizeJ. num_splits_key is
  // ceil(keys / kBlockSizeJ) (sdpa passes no num_splits_key), 1 in deterministic mode.
  const int64_t num_splits_key = DeterministicOnly() ? 1 : std::max<int64_t>(1, CeilDiv(n, kernel.block_j));
  const bool accum_gk_gv = !output_in_rf && half;  // kNeedsAccumGradK/V: output_accum_t float != output_t
  const int64_t elements_gk = accum_gk_gv ? num_splits_key * kernel.block_j * RoundUp(k, kernel.block_i) : 0;
  const int64_t elements_gv = accum_gk_gv ? num_splits_key * kernel.block_j * RoundUp(kv, kernel.block_i) : 0;
  const int64_t elements_gq = CeilDiv(m, kernel.block_i) * CeilDiv(k, kernel.block_j) *
                              (16 + kernel.block_i * kernel.block_j * 4) / 4;  // kNeedsAccumGradQ (split keys)
  const int64_t workspace_bytes = batch * heads * RoundUp(elements_gk + elements_gv + elements_gq, 4) * 4;
  if (workspace_bytes > 0) {
    const at::Tensor workspace = at::empty({workspace_bytes}, query.options().dtype(at::kByte));
  }
  return {grad_q.transpose(1, 2), grad_k.transpose(1, 2), grad_v.transpose(1, 2), grad_bias};
}

// _scaled_dot_product_cudnn_attention_cuda -> _cudnn_attention_forward -> run_cudnn_SDP_fprop (MHA.cpp):
// the philox seed and offset as 0-dim int64 tensors on the card, made whether or not dropout runs; the
// bias expanded to [B, 1|H, L, S] (a view); the output in the query's layout ([B, H, S_q, D_v]) and the
// softmax statistics [B, H, S_q, 1] float when asked for.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
CudnnAttentionCudaMeta(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_bias, bool compute_log_sumexp, double dropout_p,
                       bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  const int64_t batch = query.size(0), heads = query.size(1), s_q = query.size(2), s_kv = key.size(2);
  const int64_t d_v = value.size(3);
  const at::Tensor seed = at::empty({}, query.options().dtype(at::kLong));
  const at::Tensor offset = at::empty({}, query.options().dtype(at::kLong));
  at::Tensor out = query.sizes() == at::IntArrayRef({batch, heads, s_q, d_v})
                       ? at::empty_like(query)
                       : at::empty({batch, heads, s_q, d_v}, query.options());  // alloc_with_matching_layout
  at::Tensor stats;
  if (compute_log_sumexp) stats = at::empty({batch, heads, s_q, 1}, query.options().dtype(at::kFloat));
  return {out, stats, at::Tensor(), at::Tensor(), c10::SymInt(s_q), c10::SymInt(s_kv), seed, offset, at::Tensor()};
}

// _scaled_dot_product_cudnn_attention_backward_cuda -> run_cudnn_SDP_bprop: dq, dk, dv like q, k, v;
// a grad_out whose strides differ from the output's is first copied into the output's layout.
std::tuple<at::Tensor, at::Tensor, at::Tensor> CudnnAttentionBackwardCudaMeta(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& philox_seed, const at::Tensor& philox_offset,
    const at::Tensor& attn_bias, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, c10::SymInt max_q,
    c10::SymInt max_k, double dropout_p, bool is_causal, std::optional<double> scale) {
  if (!grad_out.defined()) return {};
  at::Tensor dq = at::empty_like(query), dk = at::empty_like(key), dv = at::empty_like(value);
  if (grad_out.strides() != out.strides()) {
    const at::Tensor grad_out_matching = at::empty_like(out);  // permute_to_matching_layout
  }
  return {dq, dk, dv};
}

// attention.cpp pad_last_dim<8, false>: flash needs head dims in multiples of 8.
at::Tensor PadLastDim8(const at::Tensor& t) {
  const int64_t last = t.size(-1);
  if (last % 8 == 0) return t;
  return at::pad(t, {0, 8 - last % 8});
}

// attention.cpp preprocess_mask (mem-efficient's bias): unaligned strides are padded to a multiple of 8
// (pad_bias, then sliced back), then expanded to [B, H, L, S].
at::Tensor PreprocessMask(const at::Tensor& mask, const at::Tensor& query, const at::Tensor& key) {
  constexpr int64_t kAlignment = 8;
  bool aligned = mask.stride(-1) == 1;
  for (int64_t i = 0; i < mask.dim() - 1; ++i) aligned = aligned && mask.stride(i) % kAlignment == 0;
  at::Tensor result = mask;
  if (!aligned) {
    const int64_t last = mask.size(-1);
    result = at::pad(mask, {0, kAlignment - last % kAlignment}).slice(-1, 0, last);
  }
  return result.expand({query.size(0), query.size(1), query.size(2), key.size(2)});
}

// attention.cpp should_compute_logsumexp.
bool ShouldComputeLogsumexp(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return (q.requires_grad() || k.requires_grad() || v.requires_grad()) && at::GradMode::is_enabled();
}

}  // namespace

at::Tensor ScaledDotProductAttentionCuda(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                         const std::optional<at::Tensor>& attn_mask_in, double dropout_p,
                                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
  const sdp::sdp_params params{query, key, value, attn_mask_in, dropout_p, is_causal, enable_gqa};
  const at::SDPBackend backend = CudaSdpChoice(params, TargetCc());
  // scaled_dot_product_attention: a bool mask becomes an additive one in the query's dtype (cuDNN's
  // conversion allocates the same).
  std::optional<at::Tensor> attn_mask = ConvertBooleanMask(attn_mask_in, query.dtype());
  switch (backend) {
    case at::SDPBackend::cudnn_attention: {
      const bool compute_logsumexp = ShouldComputeLogsumexp(query, key, value);
      return std::get<0>(at::_scaled_dot_product_cudnn_attention(query, key, value, attn_mask, compute_logsumexp,
                                                                 dropout_p, is_causal, false, scale));
    }
    case at::SDPBackend::flash_attention: {
      const int64_t og_size = query.size(-1);
      const at::Tensor query_padded = PadLastDim8(query), key_padded = PadLastDim8(key),
                       value_padded = PadLastDim8(value);
      const double og_scale = sdp::calculate_scale(query, scale).as_float_unchecked();
      at::Tensor out = std::get<0>(at::_scaled_dot_product_flash_attention(query_padded, key_padded, value_padded,
                                                                           dropout_p, is_causal, false, og_scale));
      return og_size % 8 != 0 ? out.slice(-1, 0, og_size) : out;  // post_process_flash_output
    }
    case at::SDPBackend::efficient_attention: {
      const bool compute_logsumexp = ShouldComputeLogsumexp(query, key, value);
      if (attn_mask.has_value()) attn_mask = PreprocessMask(*attn_mask, query, key);
      return std::get<0>(at::_scaled_dot_product_efficient_attention(query, key, value, attn_mask, compute_logsumexp,
                                                                     dropout_p, is_causal, scale));
    }
    case at::SDPBackend::math:
      return AttentionMath(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
    default:
      TORCH_CHECK(false, "No viable backend for scaled_dot_product_attention was found.");
  }
}

void RegisterAttentionCuda(torch::Library& meta) {
  meta.impl("_scaled_dot_product_flash_attention", TORCH_FN(FlashAttentionCudaMeta));
  meta.impl("_scaled_dot_product_flash_attention_backward", TORCH_FN(FlashAttentionBackwardCudaMeta));
  meta.impl("_scaled_dot_product_efficient_attention", TORCH_FN(EfficientAttentionCudaMeta));
  meta.impl("_scaled_dot_product_efficient_attention_backward", TORCH_FN(EfficientAttentionBackwardCudaMeta));
  meta.impl("_scaled_dot_product_cudnn_attention", TORCH_FN(CudnnAttentionCudaMeta));
  meta.impl("_scaled_dot_product_cudnn_attention_backward", TORCH_FN(CudnnAttentionBackwardCudaMeta));
}

}  // namespace oomguard::meta_kernels
