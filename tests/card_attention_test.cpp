// Meta as a card (Note [Meta as a card]): scaled_dot_product_attention picks the kernel PyTorch 2.11's
// CUDA build picks on a T4 (sm_75), an A100 (sm_80) and an H100 (sm_90), and allocates what that
// kernel allocates (Note [Attention kernels of a card on meta]). Each byte count is derived from the
// CUDA source in the comment beside it; cpu mode is meta_coverage_test.cpp's and meta_op_bytes_test.cpp's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "backends/meta/cuda_sdp_choice.h"
#include "backends/meta/kernel_target.h"
#include "tests/card_mode_harness.h"

namespace oomguard {
namespace {

using testing::kMeta;
using testing::Measured;
using CardAttention = testing::CardModeTest;

template <typename F>
Measured Measure(F&& f) {
  return testing::MeasureOnMeta(std::forward<F>(f));
}

enum class Extra { kNone, kMask, kDropout };

struct Inputs {
  at::Tensor q, k, v;
  std::optional<at::Tensor> mask;
  double dropout = 0.0;
};

// [B=2, H=4, S=256, D=64] leaves that need grad; a bool [S, S] mask or dropout 0.1.
Inputs MakeInputs(at::ScalarType dtype, Extra extra, int64_t d = 64, int64_t s_q = 256, int64_t s_k = 256) {
  Inputs in;
  in.q = at::empty({2, 4, s_q, d}, kMeta.dtype(dtype)).requires_grad_();
  in.k = at::empty({2, 4, s_k, d}, kMeta.dtype(dtype)).requires_grad_();
  in.v = at::empty({2, 4, s_k, d}, kMeta.dtype(dtype)).requires_grad_();
  if (extra == Extra::kMask) in.mask = at::empty({s_q, s_k}, kMeta.dtype(at::kBool));
  if (extra == Extra::kDropout) in.dropout = 0.1;
  return in;
}

at::SDPBackend Choice(const Inputs& in, int cc, bool is_causal = false, bool gqa = false) {
  return CudaSdpChoice({in.q, in.k, in.v, in.mask, in.dropout, is_causal, gqa}, cc);
}

std::string BackendName(at::SDPBackend b) {
  switch (b) {
    case at::SDPBackend::math: return "math";
    case at::SDPBackend::flash_attention: return "flash";
    case at::SDPBackend::efficient_attention: return "efficient";
    case at::SDPBackend::cudnn_attention: return "cudnn";
    default: return "error";
  }
}

// The table of choices: capability x dtype x (none, mask, dropout). sm_75 has no flash (sm_80+) and no
// bf16 mem-efficient (sm_80+), so bf16 falls to math; sm_80 runs flash for fp16/bf16 unless a mask
// is given (flash takes none), then mem-efficient; fp32 is mem-efficient's everywhere; sm_90 tries
// cuDNN first (cuDNN 9.19 > 9.15.0), which takes fp16/bf16 with a [L, S] mask and dropout alike.
TEST_F(CardAttention, ChoosesTheBackendCudaChoosesOnEachCard) {
  struct Row {
    int cc;
    at::ScalarType dtype;
    const char* none;
    const char* mask;
    const char* dropout;
  };
  const std::vector<Row> rows = {
      {75, at::kFloat, "efficient", "efficient", "efficient"}, {75, at::kHalf, "efficient", "efficient", "efficient"},
      {75, at::kBFloat16, "math", "math", "math"},             {80, at::kFloat, "efficient", "efficient", "efficient"},
      {80, at::kHalf, "flash", "efficient", "flash"},          {80, at::kBFloat16, "flash", "efficient", "flash"},
      {90, at::kFloat, "efficient", "efficient", "efficient"}, {90, at::kHalf, "cudnn", "cudnn", "cudnn"},
      {90, at::kBFloat16, "cudnn", "cudnn", "cudnn"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE("sm_" + std::to_string(r.cc) + " " + std::string(c10::toString(r.dtype)));
    EXPECT_EQ(BackendName(Choice(MakeInputs(r.dtype, Extra::kNone), r.cc)), r.none);
    EXPECT_EQ(BackendName(Choice(MakeInputs(r.dtype, Extra::kMask), r.cc)), r.mask);
    EXPECT_EQ(BackendName(Choice(MakeInputs(r.dtype, Extra::kDropout), r.cc)), r.dropout);
  }
}

TEST_F(CardAttention, ChooserRulesAtTheirEdges) {
  // Flash pads head dims to multiples of 8 itself, so 60 is flash's; mem-efficient needs 60 % 8 == 0.
  EXPECT_EQ(BackendName(Choice(MakeInputs(at::kHalf, Extra::kNone, 60), 80)), "flash");
  EXPECT_EQ(BackendName(Choice(MakeInputs(at::kHalf, Extra::kNone, 60), 75)), "math");
  // Head dims past 256 leave flash; mem-efficient has no upper bound.
  EXPECT_EQ(BackendName(Choice(MakeInputs(at::kHalf, Extra::kNone, 264), 80)), "efficient");
  // cuDNN takes head dims up to 128 on sm_90 (256 needs cuDNN > 9.22); 160 goes to flash.
  EXPECT_EQ(BackendName(Choice(MakeInputs(at::kHalf, Extra::kNone, 160), 90)), "flash");
  // is_causal with seq_q != seq_k: not flash.
  EXPECT_EQ(BackendName(Choice(MakeInputs(at::kHalf, Extra::kNone, 64, 128, 256), 80, /*is_causal=*/true)), "efficient");
  // sm_86 training with head dim in (192, 224]: not flash.
  EXPECT_EQ(BackendName(Choice(MakeInputs(at::kHalf, Extra::kNone, 200), 86)), "efficient");
  EXPECT_EQ(BackendName(Choice(MakeInputs(at::kHalf, Extra::kNone, 200), 80)), "flash");
  // Grouped-query heads with enable_gqa: flash takes them, mem-efficient does not.
  Inputs gqa = MakeInputs(at::kHalf, Extra::kNone);
  gqa.k = at::empty({2, 2, 256, 64}, kMeta.dtype(at::kHalf));
  gqa.v = at::empty({2, 2, 256, 64}, kMeta.dtype(at::kHalf));
  EXPECT_EQ(BackendName(Choice(gqa, 80, false, /*gqa=*/true)), "flash");
  EXPECT_EQ(BackendName(Choice(gqa, 75, false, /*gqa=*/true)), "math");
  // cuDNN needs the mask shape check: a [B, 1, L, S] mask passes, a 3-d one does not.
  Inputs mask3 = MakeInputs(at::kHalf, Extra::kNone);
  mask3.mask = at::empty({4, 256, 256}, kMeta.dtype(at::kBool));
  EXPECT_EQ(BackendName(Choice(mask3, 90)), "efficient");
  // The default order everywhere else puts math before cuDNN.
  EXPECT_EQ(CudaSdpPriorityOrder(80)[0], at::SDPBackend::flash_attention);
  EXPECT_EQ(CudaSdpPriorityOrder(90)[0], at::SDPBackend::cudnn_attention);
}

// Runs sdpa forward, then autograd's backward with a gradient laid out like the output (empty_like),
// keeping the graph (retain_graph) so that what backward leaves is its gradients alone.
struct Pass {
  Measured forward, backward;
};
Pass RunPass(const Inputs& in, int cc) {
  ScopedKernelTarget card(KernelTarget::Cuda(cc));
  at::Tensor out;
  Pass pass;
  pass.forward = Measure([&] { out = at::scaled_dot_product_attention(in.q, in.k, in.v, in.mask, in.dropout); });
  const at::Tensor grad = at::empty_like(out);
  std::vector<at::Tensor> grads;
  pass.backward = Measure([&] { grads = torch::autograd::grad({out}, {in.q, in.k, in.v}, {grad}, /*retain_graph=*/true); });
  return pass;
}

constexpr int64_t kN = 2 * 4 * 256 * 64;  // elements of q, k, v and the output
constexpr int64_t kLse = 2 * 4 * 256 * 4; // a float per (batch, head, query): 8192 bytes

// Flash, A100, fp16 (attention.cu _scaled_dot_product_flash_attention_cuda, flash_api.cpp mha_fwd):
// out empty_like(q) 262144 + softmax_lse [2, 4, 256] float 8192 + rng_state [2] uint64 16 + _unused []
// uint64 8; no split-KV (2 x 4 x 4 query blocks = 32 < 0.8 x 2 x 108 SMs, and one 256-key block).
// All stay: the output and, saved for backward, logsumexp, rng_state and _unused. The inputs are
// [B, H, S, D]-contiguous, so q.transpose(1, 2) and out = empty_like of it keep that memory order:
// backward's _flash_attention_backward copies grad_out and out to [B, S, H, D] ("CUDA code assumes that
// dout is contiguous"), 2 x 262144. Then mha_bwd: dq, dk, dv 3 x 262144, softmax_d [2, 4, round128(256)]
// float 8192, dq_accum [2, 256, 4, 64] float 524288, all live together. The gradients stay.
TEST_F(CardAttention, FlashOnAnA100AllocatesWhatMhaFwdAndMhaBwdDo) {
  const Pass pass = RunPass(MakeInputs(at::kHalf, Extra::kNone), 80);
  const int64_t forward = kN * 2 + kLse + 16 + 8;
  EXPECT_EQ(pass.forward.allocated, forward);
  EXPECT_EQ(pass.forward.live, forward);
  EXPECT_EQ(pass.forward.peak, forward);
  const int64_t copies = 2 * kN * 2, grads = 3 * kN * 2, softmax_d = kLse, dq_accum = 2 * 256 * 4 * 64 * 4;
  EXPECT_EQ(pass.backward.allocated, copies + grads + softmax_d + dq_accum);
  EXPECT_EQ(pass.backward.peak, copies + grads + softmax_d + dq_accum);
  EXPECT_EQ(pass.backward.live, grads);
}

// The layout a model hands over: q, k, v projected as [B, S, H, D] and transposed, so q.transpose(1, 2)
// is contiguous, out is [B, S, H, D] in memory and a gradient laid out like it needs no copy: backward
// allocates mha_bwd's buffers and the gradients only.
TEST_F(CardAttention, FlashBackwardCopiesNothingForProjectedInputs) {
  ScopedKernelTarget card(KernelTarget::Cuda(80));
  std::vector<at::Tensor> leaves;
  for (int i = 0; i < 3; ++i) leaves.push_back(at::empty({2, 256, 4, 64}, kMeta.dtype(at::kHalf)).requires_grad_());
  const at::Tensor out = at::scaled_dot_product_attention(leaves[0].transpose(1, 2), leaves[1].transpose(1, 2),
                                                          leaves[2].transpose(1, 2));
  const at::Tensor grad = at::empty_like(out);
  std::vector<at::Tensor> grads;
  const Measured m = Measure([&] { grads = torch::autograd::grad({out}, leaves, {grad}, /*retain_graph=*/true); });
  const int64_t dq_accum = 2 * 256 * 4 * 64 * 4;
  EXPECT_EQ(m.allocated, 3 * kN * 2 + kLse + dq_accum);
  EXPECT_EQ(m.live, 3 * kN * 2);
}

// With dropout mha_fwd makes rng_state a second time (the first is freed when replaced): 16 bytes more
// allocated and at the peak, the same kept. bf16 allocates as fp16.
TEST_F(CardAttention, FlashWithDropoutMakesItsRngStateTwice) {
  const Pass pass = RunPass(MakeInputs(at::kBFloat16, Extra::kDropout), 80);
  const int64_t kept = kN * 2 + kLse + 16 + 8;
  EXPECT_EQ(pass.forward.allocated, kept + 16);
  EXPECT_EQ(pass.forward.peak, kept + 16);
  EXPECT_EQ(pass.forward.live, kept);
}

// Head dim 60: sdpa pads q, k and v to 64 (pad_last_dim<8>: 3 x [2, 4, 256, 64] fp16, saved by the flash
// node as its inputs), runs flash on them and slices the output back (a view).
TEST_F(CardAttention, FlashPadsHeadDimsToAMultipleOfEight) {
  const Pass pass = RunPass(MakeInputs(at::kHalf, Extra::kNone, 60), 80);
  const int64_t forward = 3 * kN * 2 + kN * 2 + kLse + 16 + 8;
  EXPECT_EQ(pass.forward.allocated, forward);
  EXPECT_EQ(pass.forward.live, forward);
}

// Decoding (one query over 2048 keys, 8 heads, no grad): set_params_splitkv splits the keys 8 ways on an
// A100 (num_splits_heuristic: 8 query blocks, 216 = 2 x 108 SM slots, 8 key blocks of 256; 8 splits reach
// 85% of the best efficiency first), so softmax_lse_accum [8, 1, 8, 1] float 256 and out_accum
// [8, 1, 8, 1, 64] float 16384 live while the kernel runs, beside out 1024, softmax_lse 32, rng_state 16
// and _unused 8; only the output stays (nothing is saved without grad).
TEST_F(CardAttention, FlashSplitsTheKeysOfADecodeStep) {
  ScopedKernelTarget card(KernelTarget::Cuda(80));
  const at::Tensor q = at::empty({1, 8, 1, 64}, kMeta.dtype(at::kHalf));
  const at::Tensor kv = at::empty({1, 8, 2048, 64}, kMeta.dtype(at::kHalf));
  at::Tensor out;
  const Measured m = Measure([&] { out = at::scaled_dot_product_attention(q, kv, kv); });
  EXPECT_EQ(m.allocated, 1024 + 32 + 256 + 16384 + 16 + 8);
  EXPECT_EQ(m.peak, 1024 + 32 + 256 + 16384 + 16 + 8);
  EXPECT_EQ(m.live, 1024);
}

// Mem-efficient, A100, fp32 (_efficient_attention_forward): res [2, 256, 4, 64] float 524288 and
// logsumexp [2, 4, ceil(256 / 32) x 32] float 8192 (grad is needed); philox seed and offset stay on the
// host. Backward (_efficient_attention_backward): grad_q/k/v 3 x 524288; cutlassB's f32 sm80 kernel
// 64x64 (kMaxK 64); delta from (grad_out * out).sum(-1) in float: the product 524288, the sum
// [2, 256, 4] 8192 and its contiguous transpose 8192, all live at once; then the workspace: dQ's
// GradQTempStorage per 64-query block and 64-column block, (16 + 64 x 64 x 4) bytes, 4 x 1 of them per
// (batch, head): 8 x 16400 floats = 524800 bytes. Peak: gradients + product + sum + delta.
TEST_F(CardAttention, MemEfficientOnAnA100Fp32) {
  const Pass pass = RunPass(MakeInputs(at::kFloat, Extra::kNone), 80);
  EXPECT_EQ(pass.forward.allocated, kN * 4 + kLse);
  EXPECT_EQ(pass.forward.live, kN * 4 + kLse);
  const int64_t grads = 3 * kN * 4, product = kN * 4, sum = kLse, delta = kLse, workspace = 8 * 16400 * 4;
  EXPECT_EQ(pass.backward.allocated, grads + product + sum + delta + workspace);
  EXPECT_EQ(pass.backward.peak, grads + product + sum + delta);
  EXPECT_EQ(pass.backward.live, grads);
}

// Mem-efficient with a bool mask, A100, fp16: the mask becomes an additive fp16 [256, 256] (where:
// 131072, beside two 2-byte fp16 scalars freed after it, the -inf and where.ScalarSelf's 0), aligned already (stride 256), expanded to
// [2, 4, 256, 256] as a view and saved as the attention bias; res 262144, logsumexp 8192. Backward:
// cutlassB's f16 sm80 64x64 k64 sequence-aligned kernel, output in registers: grads 3 x 262144, delta
// [2, 4, 256] float 8192 (the kernel computes it), workspace 524800 (dQ only). No bias gradient.
TEST_F(CardAttention, MemEfficientWithAMaskOnAnA100Fp16) {
  const Pass pass = RunPass(MakeInputs(at::kHalf, Extra::kMask), 80);
  const int64_t mask = 256 * 256 * 2;
  EXPECT_EQ(pass.forward.allocated, 2 + 2 + mask + kN * 2 + kLse);
  EXPECT_EQ(pass.forward.live, mask + kN * 2 + kLse);
  EXPECT_EQ(pass.forward.peak, mask + kN * 2 + kLse);
  const int64_t grads = 3 * kN * 2, delta = kLse, workspace = 8 * 16400 * 4;
  EXPECT_EQ(pass.backward.allocated, grads + delta + workspace);
  EXPECT_EQ(pass.backward.peak, grads + delta + workspace);
  EXPECT_EQ(pass.backward.live, grads);
}

// A mask over 100 keys: its rows (stride 100) are not 8-aligned, so preprocess_mask pads it to 104
// columns (pad_bias: constant_pad_nd, [256, 104] fp16 53248) and slices it back, freeing the unpadded
// additive mask (where: 51200, beside its two 2-byte scalars) once replaced; the padded one is the
// saved bias. res [2, 256, 4, 64] fp16 262144, logsumexp 8192.
TEST_F(CardAttention, MemEfficientPadsAnUnalignedMask) {
  const Inputs in = MakeInputs(at::kHalf, Extra::kMask, 64, 256, 100);
  ScopedKernelTarget card(KernelTarget::Cuda(80));
  ASSERT_EQ(BackendName(Choice(in, 80)), "efficient");
  at::Tensor out;
  const Measured m = Measure([&] { out = at::scaled_dot_product_attention(in.q, in.k, in.v, in.mask); });
  EXPECT_EQ(m.allocated, 2 + 2 + 256 * 100 * 2 + 256 * 104 * 2 + kN * 2 + kLse);
  EXPECT_EQ(m.live, 256 * 104 * 2 + kN * 2 + kLse);
}

// A T4 with dropout, fp16: mem-efficient (no flash below sm_80), the same forward bytes as without
// (seed and offset on the host); backward through cutlassB's f16 sm75 64x64 k64 dropout kernel (the
// first with kApplyDropout and kMaxK >= 64): output in registers (kIsHalf, kMaxK <= kBlockSizeI), so the
// workspace is dQ's alone, 524800 bytes as on the A100; delta [2, 4, 256] float (computed by the kernel
// off sm_70).
TEST_F(CardAttention, MemEfficientWithDropoutOnAT4) {
  const Pass pass = RunPass(MakeInputs(at::kHalf, Extra::kDropout), 75);
  EXPECT_EQ(pass.forward.allocated, kN * 2 + kLse);
  const int64_t grads = 3 * kN * 2, delta = kLse, workspace = 8 * 16400 * 4;
  EXPECT_EQ(pass.backward.allocated, grads + delta + workspace);
  EXPECT_EQ(pass.backward.live, grads);
}

// cuDNN, H100, fp16 (_cudnn_attention_forward, run_cudnn_SDP_fprop): the philox seed and offset, 0-dim
// int64 on the card, 8 + 8 bytes with or without dropout; the output in the query's layout 262144 and the
// softmax statistics [2, 4, 256, 1] float 8192; all kept for backward. Backward: dq, dk, dv like q, k, v.
// cuDNN's own workspace is not mirrored (Note [Attention kernels of a card on meta]).
TEST_F(CardAttention, CudnnOnAnH100) {
  const Pass pass = RunPass(MakeInputs(at::kHalf, Extra::kNone), 90);
  EXPECT_EQ(pass.forward.allocated, 8 + 8 + kN * 2 + kLse);
  EXPECT_EQ(pass.forward.live, 8 + 8 + kN * 2 + kLse);
  EXPECT_EQ(pass.backward.allocated, 3 * kN * 2);
  EXPECT_EQ(pass.backward.live, 3 * kN * 2);
  const Pass dropout = RunPass(MakeInputs(at::kBFloat16, Extra::kDropout), 90);
  EXPECT_EQ(dropout.forward.allocated, 8 + 8 + kN * 2 + kLse);
}

// Math on a T4 for bf16: _scaled_dot_product_attention_math (transformers/attention.cpp) computes in
// float on CUDA for half and bf16 inputs: q, k and v cast to float, q and k^T each scaled by sqrt of the
// scale, the [2, 4, 256, 256] float scores (bmm) and their _safe_softmax (the softmax, its rows' -inf
// mask: a bool eq(-inf) of the scores and its all() over the last dim, and a 4-byte scalar, as eager
// PyTorch's profiler shows on cpu), the output's bmm, and the tuple it returns cast back to bf16: the
// output and the attention weights. Forward and backward run through ordinary meta ops.
TEST_F(CardAttention, MathOnAT4ComputesBf16InFloat) {
  const Inputs in = MakeInputs(at::kBFloat16, Extra::kNone);
  ScopedKernelTarget card(KernelTarget::Cuda(75));
  at::Tensor out;
  const Measured m = Measure([&] { out = at::scaled_dot_product_attention(in.q, in.k, in.v); });
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  EXPECT_EQ(out.sizes(), in.q.sizes());
  const int64_t scores = 2 * 4 * 256 * 256;
  const int64_t float_copies = 3 * kN * 4, scaled = 2 * kN * 4, products = scores * 4 + kN * 4;
  const int64_t softmax = scores * 4 + scores * 1 + 2 * 4 * 256 * 1 + 4, bf16_results = kN * 2 + scores * 2;
  EXPECT_EQ(m.allocated, float_copies + scaled + products + softmax + bf16_results);
  EXPECT_EQ(m.allocated, 9177092);
}

}  // namespace
}  // namespace oomguard
