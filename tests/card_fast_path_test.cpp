// Meta as a card (Note [Meta as a card]): nn.MultiheadAttention's and nn.TransformerEncoderLayer's fused
// fast path (_native_multi_head_attention, _transformer_encoder_layer_fwd, in evaluation under no_grad)
// allocate what PyTorch 2.11's CUDA build allocates on a T4 (sm_75), an A100 (sm_80) and an H100
// (sm_90): Note [The attention fast path on a card]. Each byte count is derived from the CUDA source in
// the comment beside it; cpu mode is meta_user_ops_test.cpp's (meta equals cpu there).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/meta/kernel_target.h"
#include "tests/card_mode_harness.h"

namespace oomguard {
namespace {

using testing::kMeta;
using testing::Measured;
using CardFastPath = testing::CardModeTest;

// An encoder layer's parameters on meta: embedding d, `heads` heads, feed-forward f.
struct Layer {
  Layer(int64_t d_, int64_t heads_, int64_t f, at::ScalarType dtype) : d(d_), heads(heads_) {
    const at::TensorOptions o = kMeta.dtype(dtype);
    qkv_w = at::empty({3 * d, d}, o), qkv_b = at::empty({3 * d}, o);
    proj_w = at::empty({d, d}, o), proj_b = at::empty({d}, o);
    n1_w = at::empty({d}, o), n1_b = at::empty({d}, o), n2_w = at::empty({d}, o), n2_b = at::empty({d}, o);
    f1_w = at::empty({f, d}, o), f1_b = at::empty({f}, o), f2_w = at::empty({d, f}, o), f2_b = at::empty({d}, o);
  }
  int64_t d, heads;
  at::Tensor qkv_w, qkv_b, proj_w, proj_b, n1_w, n1_b, n2_w, n2_b, f1_w, f1_b, f2_w, f2_b;
};

struct Call {
  std::optional<at::Tensor> mask;  // the modules' merged mask: a float [B, T] padding mask is mask_type 1
  bool need_weights = false;
  bool average = true;
};

// _native_multi_head_attention(x, x, x, ...) as nn.MultiheadAttention's fast path calls it, under no_grad,
// measured with `target`'s kernels; the outputs stay alive (live bytes are theirs).
Measured Mha(const KernelTarget& target, const Layer& l, const at::Tensor& x, const Call& c = {}) {
  c10::NoGradGuard no_grad;
  std::tuple<at::Tensor, at::Tensor> out;
  return testing::MeasureWithKernels(target, [&] {
    out =
        at::_native_multi_head_attention(x, x, x, l.d, l.heads, l.qkv_w, l.qkv_b, l.proj_w, l.proj_b, c.mask,
                                         c.need_weights, c.average, c.mask ? std::optional<int64_t>(1) : std::nullopt);
  });
}

Measured EncoderLayer(const KernelTarget& target, const Layer& l, const at::Tensor& x, bool norm_first,
                      const std::optional<at::Tensor>& mask = std::nullopt) {
  c10::NoGradGuard no_grad;
  at::Tensor out;
  return testing::MeasureWithKernels(target, [&] {
    out = at::_transformer_encoder_layer_fwd(x, l.d, l.heads, l.qkv_w, l.qkv_b, l.proj_w, l.proj_b,
                                             /*use_gelu=*/norm_first, norm_first, 1e-5, l.n1_w, l.n1_b, l.n2_w, l.n2_b,
                                             l.f1_w, l.f1_b, l.f2_w, l.f2_b, mask,
                                             mask ? std::optional<int64_t>(1) : std::nullopt);
  });
}

// B 2, T 32, embedding 64, 4 heads of 16 (a multiple of 8: attention.cu's fast-path condition).
constexpr int64_t kB = 2, kT = 32, kD = 64, kHeads = 4;
constexpr int64_t kN = kB * kT * kD;                // elements of the input, the output, q, k and v each
constexpr int64_t kScores = kB * kHeads * kT * kT;  // elements of the math path's [B, H, T, T] scores (2 kN)

// The fused path (native_multi_head_attention_cuda, no mask, no weights), per element size e:
//   x = linear(query, qkv_weight, qkv_bias)   addmm [B T, 3D]: 3 kN e, alive to the end
//   sdpa's output                              kN e, and the backend's others (freed on its return)
//   past_sdp = y.transpose(1, 2).reshape(...)   a view: each backend's output is [B, T, H, hd] in
//                                               memory (flash's and mem-efficient's by construction,
//                                               cuDNN's empty_like of the chunk keeps its dim order)
//   linear(past_sdp, proj)                      addmm [B T, D]: kN e, returned
// Flash (mha_fwd): softmax_lse [B, H, T] float and rng_state [2] + _unused [] uint64 (24 bytes), no
// split-KV (8 query blocks and one key block). Mem-efficient (_efficient_attention_forward): logsumexp
// [B, H, 0] (no grad: compute_log_sumexp false), seed and offset on the host. cuDNN
// (run_cudnn_SDP_fprop): seed and offset 0-dim int64 on the card (16 bytes), no statistics.
// The math path (native_multi_head_attention_cpu's code): qkv 3 kN e, q_k_v 3 kN e (qkv freed after),
// scores kScores e, transform_0213's copy kN e and the projection kN e.
int64_t FlashLse() { return kB * kHeads * kT * 4; }

TEST_F(CardFastPath, MultiheadAttentionRunsTheFusedKernelEachCardPicks) {
  struct Row {
    int cc;
    at::ScalarType dtype;
    const char* backend;
  };
  // CudaSdpChoice (card_attention_test.cpp's table): fp32 mem-efficient everywhere; fp16 mem-efficient on
  // sm_75, flash on sm_80, cuDNN on sm_90; bf16 math on sm_75 (no bf16 kernel below sm_80).
  const std::vector<Row> rows = {
      {75, at::kFloat, "efficient"}, {75, at::kHalf, "efficient"}, {75, at::kBFloat16, "math"},
      {80, at::kFloat, "efficient"}, {80, at::kHalf, "flash"},     {80, at::kBFloat16, "flash"},
      {90, at::kFloat, "efficient"}, {90, at::kHalf, "cudnn"},     {90, at::kBFloat16, "cudnn"}};
  for (const Row& r : rows) {
    SCOPED_TRACE("sm_" + std::to_string(r.cc) + " " + std::string(c10::toString(r.dtype)));
    const Layer l(kD, kHeads, 128, r.dtype);
    const at::Tensor x = at::empty({kB, kT, kD}, kMeta.dtype(r.dtype));
    const int64_t e = x.element_size();
    const Measured m = Mha(KernelTarget::Cuda(r.cc), l, x);
    const std::string backend = r.backend;
    int64_t allocated = 0, peak = 0;
    if (backend == "flash") {
      allocated = 3 * kN * e + kN * e + FlashLse() + 16 + 8 + kN * e;
      peak = 5 * kN * e;  // x, the output, the projection (lse and rng_state are gone by then)
    } else if (backend == "efficient") {
      allocated = 5 * kN * e;
      peak = 5 * kN * e;
    } else if (backend == "cudnn") {
      allocated = 3 * kN * e + 16 + kN * e + kN * e;
      peak = 5 * kN * e;  // x, the output, the projection (seed and offset are gone by then)
    } else {
      allocated = 3 * kN * e + 3 * kN * e + kScores * e + kN * e + kN * e;
      peak = 6 * kN * e;  // qkv and q_k_v
    }
    EXPECT_EQ(m.allocated, allocated) << backend;
    EXPECT_EQ(m.peak, peak) << backend;
    EXPECT_EQ(m.live, kN * e);  // the projection; the fused path returns no weights
  }
  // cpu's kernels (the default) take the math path whatever the dtype.
  const Layer l(kD, kHeads, 128, at::kHalf);
  const at::Tensor x = at::empty({kB, kT, kD}, kMeta.dtype(at::kHalf));
  const Measured cpu = Mha(KernelTarget::Cpu(), l, x);
  EXPECT_EQ(cpu.allocated, (3 * kN + 3 * kN + kScores + kN + kN) * 2);
  EXPECT_EQ(cpu.peak, 6 * kN * 2);
}

// need_weights takes the math path on every card (attention.cu: the fused path needs !need_weights).
// The scores stay for the weights: transform_0213's copy and the projection then peak over q_k_v and the
// scores (3 kN + 2 kN + kN + kN); averaged, qkt.sum(1) adds [B, T, T] (kScores / heads) and the scores go.
TEST_F(CardFastPath, NeedWeightsTakesTheMathPathOnEveryCard) {
  for (const int cc : {75, 80, 90}) {
    for (const at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
      for (const bool average : {true, false}) {
        SCOPED_TRACE("sm_" + std::to_string(cc) + " " + c10::toString(dtype) + (average ? " averaged" : " per head"));
        const Layer l(kD, kHeads, 128, dtype);
        const at::Tensor x = at::empty({kB, kT, kD}, kMeta.dtype(dtype));
        const Measured m = Mha(KernelTarget::Cuda(cc), l, x, {std::nullopt, true, average});
        const int64_t e = x.element_size(), averaged = kScores / kHeads;
        EXPECT_EQ(m.allocated, (3 * kN + 3 * kN + kScores + kN + kN + (average ? averaged : 0)) * e);
        EXPECT_EQ(m.peak, (3 * kN + kScores + kN + kN) * e);
        EXPECT_EQ(m.live, (kN + (average ? averaged : kScores)) * e);
      }
    }
  }
}

// A padding mask takes the math path (attention.cu: the fused path takes no mask), whose masked softmax
// is SoftMax.cu's masked_softmax_cuda. Over 1024 keys the persistent kernel cannot run: the output
// (empty_like the scores), the masked copy and softmax's new output live together, 3 scores' worth
// beside the scores themselves; cpu's masked_softmax_cpu makes the output only. The [B, T] float mask
// is read as bool first (attention.cpp masked_softmax: B T bytes). 2 heads of 8, 1040 tokens.
TEST_F(CardFastPath, PaddingMaskOverLongSequencesSoftmaxesAMaskedCopy) {
  constexpr int64_t b = 2, t = 1040, d = 16, heads = 2;
  for (const auto& [cc, dtype] : {std::pair{80, at::kFloat}, std::pair{90, at::kHalf}, std::pair{75, at::kBFloat16}}) {
    SCOPED_TRACE("sm_" + std::to_string(cc) + " " + c10::toString(dtype));
    const Layer l(d, heads, 32, dtype);
    const at::Tensor x = at::empty({b, t, d}, kMeta.dtype(dtype));
    const Call c{at::empty({b, t}, kMeta.dtype(dtype))};
    const int64_t e = x.element_size(), n = b * t * d * e, scores = b * heads * t * t * e, bool_mask = b * t;
    const Measured card = Mha(KernelTarget::Cuda(cc), l, x, c);
    const Measured cpu = Mha(KernelTarget::Cpu(), l, x, c);
    EXPECT_EQ(card.peak, 3 * n + scores + bool_mask + 3 * scores);  // q_k_v, the scores, the mask, 3 more
    EXPECT_EQ(cpu.peak, 3 * n + scores + bool_mask + scores);
    EXPECT_EQ(card.live, n);
    EXPECT_EQ(cpu.live, n);
  }
}

// At 32 tokens the persistent kernel runs (32 keys, 128 bytes a row, a contiguous mask): the output
// only, as cpu; it needs an even head count with a [B, T] mask, which cpu does not.
TEST_F(CardFastPath, PaddingMaskOnShortSequencesRunsThePersistentKernel) {
  for (const int cc : {75, 80, 90}) {
    for (const at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
      SCOPED_TRACE("sm_" + std::to_string(cc) + " " + c10::toString(dtype));
      const Layer l(kD, kHeads, 128, dtype);
      const at::Tensor x = at::empty({kB, kT, kD}, kMeta.dtype(dtype));
      const Call c{at::empty({kB, kT}, kMeta.dtype(dtype))};
      const Measured card = Mha(KernelTarget::Cuda(cc), l, x, c);
      const Measured cpu = Mha(KernelTarget::Cpu(), l, x, c);
      const int64_t e = x.element_size();
      EXPECT_EQ(card.peak, (3 * kN + kScores + kScores) * e + kB * kT);  // q_k_v, scores, output, bool mask
      EXPECT_EQ(card.peak, cpu.peak);
      EXPECT_EQ(card.allocated, cpu.allocated);
      EXPECT_EQ(card.live, kN * e);
    }
  }
  const Call c{at::empty({kB, kT}, kMeta.dtype(at::kFloat))};

  const Layer odd(48, 3, 128, at::kFloat);  // 3 heads of 16
  const at::Tensor y = at::empty({kB, kT, 48}, kMeta.dtype(at::kFloat));
  EXPECT_NO_THROW(Mha(KernelTarget::Cpu(), odd, y, c));
  try {
    Mha(KernelTarget::Cuda(75), odd, y, c);
    ADD_FAILURE() << "an odd head count with a padding mask ran on a card";
  } catch (const c10::Error& error) {
    EXPECT_NE(std::string(error.what()).find("Only support when num_heads is even in transformer"), std::string::npos);
  }
}

// _transformer_encoder_layer_fwd (transformer.cpp, one function for cpu and CUDA) in fp16 on a T4, an
// A100 and an H100: its attention is mem-efficient's, flash's or cuDNN's fused path above (peak 5 kN e
// inside it, kN e returned); layer norm's statistics are float [B T] mean and rstd (layer_norm_cuda: 2 x 64 x 4 = 512
// bytes, freed by at::layer_norm); the feed-forward's _addmm_activation [B T, 128] is 2 kN.
// - norm last (relu): attention 5 kN; norm 1 kN + kN + 512; feed-forward x, h 2 kN, out kN: 4 kN;
//   norm 2 with the residual alive: 3 kN + 512. Peak 5 kN e.
// - norm first (gelu): norm 1's output stays under attention: 6 kN e; the feed-forward with the residual
//   and norm 2's output alive: kN + kN + 2 kN + kN = 5 kN. Peak 6 kN e.
// cpu's kernels take the math path inside (6 kN): 6 kN e and 7 kN e.
// With a padding mask the attention takes the math path (fp32 on a T4): its peak, q_k_v, the scores, the
// bool mask and the persistent kernel's output, is the layer's, as on cpu.
TEST_F(CardFastPath, TransformerEncoderLayerRunsTheCardsAttention) {
  for (const int cc : {75, 80, 90}) {
    for (const bool norm_first : {false, true}) {
      SCOPED_TRACE("sm_" + std::to_string(cc) + (norm_first ? " norm first" : " norm last"));
      const Layer l(kD, kHeads, 128, at::kHalf);
      const at::Tensor x = at::empty({kB, kT, kD}, kMeta.dtype(at::kHalf));
      const Measured m = EncoderLayer(KernelTarget::Cuda(cc), l, x, norm_first);
      EXPECT_EQ(m.peak, (norm_first ? 6 : 5) * kN * 2);
      EXPECT_EQ(m.live, kN * 2);
      EXPECT_EQ(EncoderLayer(KernelTarget::Cpu(), l, x, norm_first).peak, (norm_first ? 7 : 6) * kN * 2);
    }
  }
  const Layer l(kD, kHeads, 128, at::kFloat);
  const at::Tensor x = at::empty({kB, kT, kD}, kMeta.dtype(at::kFloat));
  const at::Tensor mask = at::empty({kB, kT}, kMeta.dtype(at::kFloat));
  const Measured card = EncoderLayer(KernelTarget::Cuda(75), l, x, false, mask);
  EXPECT_EQ(card.peak, (3 * kN + kScores + kScores) * 4 + kB * kT);
  EXPECT_EQ(card.peak, EncoderLayer(KernelTarget::Cpu(), l, x, false, mask).peak);
  EXPECT_EQ(card.live, kN * 4);
}

}  // namespace
}  // namespace oomguard
