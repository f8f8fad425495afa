// Meta as a card (`--kernels cuda`, backends/meta/kernel_target.h): the Meta kernels make the
// allocations PyTorch 2.11's CUDA kernels make. Each expectation is derived by hand from the CUDA
// source its kernel names; cpu mode stays the cpu backend's, byte for byte.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "allocators/install.h"
#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels.h"
#include "tests/meta_ops_harness.h"

namespace oomguard {
namespace {

const at::TensorOptions kMeta = at::TensorOptions().device(at::kMeta);
const at::TensorOptions kMetaBf16 = kMeta.dtype(at::kBFloat16);

class CardKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterMetaKernels();
    at::set_num_threads(1);
  }
  static Ledger& ledger() { return MetaAccount().ledger(); }
  static int64_t Live() { return ledger().live_bytes(); }
};

// The live bytes `f` leaves (what it returns, and what autograd saved for backward), and the highest
// live bytes above the start while it ran.
struct Bytes {
  int64_t left = 0;
  int64_t peak = 0;
};
template <class F>
Bytes MeasureOnCard(const KernelTarget& target, F&& f) {
  ScopedKernelTarget scope(target);
  Ledger& ledger = MetaAccount().ledger();
  ledger.ResetStatistics();
  const int64_t before = ledger.live_bytes();
  Bytes bytes;
  {
    at::Tensor kept = f();
    bytes.left = ledger.live_bytes() - before;
  }
  bytes.peak = ledger.Snapshot().peak_bytes - before;
  return bytes;
}

const KernelTarget kT4 = KernelTarget::Cuda(75);

TEST_F(CardKernelsTest, DescribesTheTarget) {
  EXPECT_EQ(Describe(KernelTarget::Cpu()), "cpu");
  EXPECT_EQ(Describe(kT4), "cuda sm_75");
  EXPECT_FALSE(CurrentKernelTarget().cuda());
}

// Dropout.cpp: on cuda, training dropout is native_dropout (Dropout.cu's dropout_cuda: a bool mask of
// 1 byte per element, then the output), and NativeDropoutBackward0 keeps the mask. On cpu the
// composite's noise is in the input's dtype (2 bytes for bfloat16) and MulBackward0 keeps it.
TEST_F(CardKernelsTest, DropoutOnACardKeepsAOneByteMask) {
  const at::Tensor x = at::empty({1000}, kMetaBf16).requires_grad_(true);
  const Bytes cuda = MeasureOnCard(kT4, [&] { return at::dropout(x, 0.1, true); });
  EXPECT_EQ(cuda.left, 2000 + 1000);  // output, mask
  const Bytes cpu = MeasureOnCard(KernelTarget::Cpu(), [&] { return at::dropout(x, 0.1, true); });
  EXPECT_EQ(cpu.left, 2000 + 2000);  // noise, output
  // Not training, or p = 0: the input itself on both.
  EXPECT_EQ(MeasureOnCard(kT4, [&] { return at::dropout(x, 0.1, false); }).left, 0);
  EXPECT_EQ(MeasureOnCard(kT4, [&] { return at::dropout(x, 0.0, true); }).left, 0);
}

TEST_F(CardKernelsTest, DropoutOnACardRecordsNativeDropoutForBackward) {
  const at::Tensor x = at::empty({1000}, kMetaBf16).requires_grad_(true);
  ScopedKernelTarget cuda(kT4);
  const at::Tensor y = at::dropout(x, 0.5, true);
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), "NativeDropoutBackward0");
  y.sum().backward();
  EXPECT_EQ(x.grad().scalar_type(), at::kBFloat16);
}

// layer_norm_kernel.cu (layer_norm_cuda): mean and rstd [M] in the accumulate type, float for
// bfloat16, whatever the parameters' dtype; cpu keeps them in X's dtype.
TEST_F(CardKernelsTest, LayerNormOnACardKeepsFloatStatistics) {
  const at::Tensor x = at::empty({8, 16, 64}, kMetaBf16).requires_grad_(true);
  const at::Tensor w = at::empty({64}, kMetaBf16).requires_grad_(true);
  const at::Tensor b = at::empty({64}, kMetaBf16).requires_grad_(true);
  const auto ln = [&] { return at::layer_norm(x, {64}, w, b); };
  const int64_t y_bytes = 8 * 16 * 64 * 2, rows = 8 * 16;
  EXPECT_EQ(MeasureOnCard(kT4, ln).left, y_bytes + 2 * rows * 4);
  EXPECT_EQ(MeasureOnCard(KernelTarget::Cpu(), ln).left, y_bytes + 2 * rows * 2);
  ScopedKernelTarget cuda(kT4);
  const at::Tensor y = ln();
  y.sum().backward();
  EXPECT_EQ(w.grad().scalar_type(), at::kBFloat16);
}

// layer_norm_backward_cuda: X contiguous, dX, dgamma, dbeta, then dY.contiguous(); no [threads, 2N]
// scratch as cpu's kernel has (M = 128 rows here, under the 65536 of the partial-sum path).
TEST_F(CardKernelsTest, LayerNormBackwardOnACardHasNoThreadScratch) {
  const at::Tensor x = at::empty({128, 64}, kMetaBf16);
  const at::Tensor dy = at::empty({128, 64}, kMetaBf16);
  const at::Tensor w = at::empty({64}, kMetaBf16);
  const at::Tensor b = at::empty({64}, kMetaBf16);
  const auto backward = [&](const KernelTarget& target) {
    ScopedKernelTarget scope(target);
    auto [y, mean, rstd] = at::native_layer_norm(x, {64}, w, b, 1e-5);
    return MeasureOnCard(target, [&] {
      auto [dx, dw, db] = at::native_layer_norm_backward(dy, x, {64}, mean, rstd, w, b, {true, true, true});
      return dx;
    });
  };
  const Bytes cuda = backward(kT4);
  EXPECT_EQ(cuda.left, 128 * 64 * 2);
  EXPECT_EQ(cuda.peak, 128 * 64 * 2 + 2 * 64 * 2);  // dX, dgamma, dbeta
  const Bytes cpu = backward(KernelTarget::Cpu());
  EXPECT_EQ(cpu.peak, 128 * 64 * 2 + 2 * 64 * 2 + 1 * 2 * 64 * 2);  // and [threads = 1, 2N] bf16
}

// Note [Operands promoted on cpu]: cpu casts the bfloat16 operand to float first; CUDA's
// TensorIterator casts while it computes.
TEST_F(CardKernelsTest, MixedDtypesOnACardMakeNoCopy) {
  const at::Tensor a = at::empty({1000}, kMetaBf16);
  const at::Tensor f = at::empty({1000}, kMeta.dtype(at::kFloat));
  EXPECT_EQ(MeasureOnCard(kT4, [&] { return a * f; }).peak, 4000);
  EXPECT_EQ(MeasureOnCard(KernelTarget::Cpu(), [&] { return a * f; }).peak, 4000 + 4000);
}

// ReduceOps.cpp mean_out: cpu sums a bfloat16 input in float (a float result and a float copy of the
// input); other devices reduce into the result.
TEST_F(CardKernelsTest, BFloat16MeanOnACardReducesIntoTheResult) {
  const at::Tensor x = at::empty({4, 256}, kMetaBf16);
  EXPECT_EQ(MeasureOnCard(kT4, [&] { return x.mean({1}); }).peak, 4 * 2);
  EXPECT_EQ(MeasureOnCard(KernelTarget::Cpu(), [&] { return x.mean({1}); }).peak, 4 * 2 + 4 * 4 + 4 * 256 * 4);
}

// Note [softmax backward on a card] (meta_kernels_softmax.cpp): SoftMax.cu's softmax_backward_cuda_out
// computes tmp = grad * output (like the gradient) before writing grad_input. [2, 4, 16, 16] float:
// grad_input 8192 bytes, tmp 8192 more at the peak; cpu's kernel makes grad_input alone, and
// log_softmax's backward has no product on either.
TEST_F(CardKernelsTest, SoftmaxBackwardOnACardMultipliesFirst) {
  const at::Tensor y = at::empty({2, 4, 16, 16}, kMeta), grad = at::empty({2, 4, 16, 16}, kMeta);
  const auto backward = [&] { return at::_softmax_backward_data(grad, y, -1, at::kFloat); };
  const Bytes card = MeasureOnCard(kT4, backward);
  EXPECT_EQ(card.left, 8192);
  EXPECT_EQ(card.peak, 8192 + 8192);
  EXPECT_EQ(MeasureOnCard(KernelTarget::Cpu(), backward).peak, 8192);
  EXPECT_EQ(MeasureOnCard(kT4, [&] { return at::_log_softmax_backward_data(grad, y, -1, at::kFloat); }).peak, 8192);
}

// Embedding.cu's embedding_dense_backward_cuda: beyond 3072 indices it sorts them; the sizes of
// embedding_backward_cuda_kernel's buffers follow from n, V and dim alone (not modelled: CUB's scratch).
TEST_F(CardKernelsTest, EmbeddingBackwardOnACardSortsItsIndices) {
  (void)TakeKernelWarnings();
  const at::Tensor grad = at::empty({4000, 16}, kMeta.dtype(at::kFloat));
  const at::Tensor indices = at::empty({4000}, kMeta.dtype(at::kLong));
  const Bytes cuda = MeasureOnCard(kT4, [&] { return at::embedding_dense_backward(grad, indices, 200, -1, false); });
  const int64_t grad_weight = 200 * 16 * 4;
  EXPECT_EQ(cuda.left, grad_weight);
  // sorted and original indices (8 bytes each), segment offsets [n], two 0-dim int64s, partials per
  // segment and their offsets [min(n, V) = 200], partial segment offsets [n / 10 + 200 = 600], and the
  // two-pass path's per-segment float sums [600, 16], all at once at the end. (600 partial segments
  // are under 4 x the 200 blocks of sum_and_scatter: no card takes the fused path here.)
  EXPECT_EQ(cuda.peak, 2 * 4000 * 8 + grad_weight + 4000 * 8 + 8 + 2 * 200 * 8 + 8 + 600 * 8 + 600 * 16 * 4);
  EXPECT_EQ(TakeKernelWarnings().size(), 1u);  // CUB's scratch, said once
  // Up to 3072 indices: the gradient only.
  const at::Tensor few = at::empty({3072}, kMeta.dtype(at::kLong));
  const at::Tensor few_grad = at::empty({3072, 16}, kMeta.dtype(at::kFloat));
  EXPECT_EQ(MeasureOnCard(kT4, [&] { return at::embedding_dense_backward(few_grad, few, 200, -1, false); }).peak,
            grad_weight);
  // A vocabulary of 100 for 4000 indices: sum_and_scatter's grid is 100 x 32 / 32 = 100 blocks, under a
  // T4's 40 SMs x 4 = 160, and 500 partial segments exceed 4 x 100: the fused atomic path, which keeps
  // partial_to_segment_idx [500] (int64) instead of the per-segment sums, and no float accumulator for
  // a float gradient.
  const int64_t small = 100 * 16 * 4;
  EXPECT_EQ(MeasureOnCard(kT4, [&] { return at::embedding_dense_backward(grad, indices, 100, -1, false); }).peak,
            2 * 4000 * 8 + small + 4000 * 8 + 8 + 2 * 100 * 8 + 8 + 500 * 8 + 500 * 8);
  // A card of 24 SMs (96 blocks) takes the two-pass path: per-segment sums [500, 16] in float.
  const KernelTarget few_sms = KernelTarget::Cuda(75, CudaDeviceProps{24, 1024, 32});
  EXPECT_EQ(MeasureOnCard(few_sms, [&] { return at::embedding_dense_backward(grad, indices, 100, -1, false); }).peak,
            2 * 4000 * 8 + small + 4000 * 8 + 8 + 2 * 100 * 8 + 8 + 500 * 8 + 500 * 16 * 4);
  // bf16 on the fused path: a float accumulator [100, 16] as well, copied into the gradient.
  const at::Tensor grad_bf16 = at::empty({4000, 16}, kMetaBf16);
  EXPECT_EQ(MeasureOnCard(kT4, [&] { return at::embedding_dense_backward(grad_bf16, indices, 100, -1, false); }).peak,
            2 * 4000 * 8 + 100 * 16 * 2 + 4000 * 8 + 8 + 2 * 100 * 8 + 8 + 500 * 8 + 500 * 8 + 100 * 16 * 4);
}

// group_norm.cpp's group_norm: cuda makes X plain contiguous (a copy of a channels-last input, which
// the backward keeps); cpu keeps it channels last.
TEST_F(CardKernelsTest, GroupNormOnACardCopiesAChannelsLastInput) {
  const at::Tensor x =
      at::empty({2, 8, 4, 4}, kMetaBf16).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  const at::Tensor w = at::empty({8}, kMetaBf16).requires_grad_(true);
  const at::Tensor b = at::empty({8}, kMetaBf16).requires_grad_(true);
  const auto gn = [&] { return at::group_norm(x, 2, w, b); };
  const int64_t x_bytes = 2 * 8 * 16 * 2, stats = 2 * 2 * 2;              // mean and rstd [N, group] in bf16
  EXPECT_EQ(MeasureOnCard(kT4, gn).left, x_bytes + x_bytes + 2 * stats);  // the copy, Y, mean, rstd
  EXPECT_EQ(MeasureOnCard(KernelTarget::Cpu(), gn).left, x_bytes + 2 * stats);
}

// A Megatron-style GPT layer in at:: calls on [s, b, h] activations, explicit math attention.
struct GptLayer {
  int64_t s, b, h, a;
  at::Tensor ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;

  // make(sizes): a parameter that requires grad.
  GptLayer(int64_t s, int64_t b, int64_t h, int64_t a, const std::function<at::Tensor(at::IntArrayRef)>& p)
      : s(s), b(b), h(h), a(a) {
    ln1_w = p({h}), ln1_b = p({h}), qkv_w = p({3 * h, h}), qkv_b = p({3 * h}), proj_w = p({h, h}), proj_b = p({h});
    ln2_w = p({h}), ln2_b = p({h}), fc1_w = p({4 * h, h}), fc1_b = p({4 * h}), fc2_w = p({h, 4 * h}), fc2_b = p({h});
  }
  std::vector<at::Tensor> parameters() const {
    return {ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b};
  }

  // [s, b, h] -> [b, a, s, d], a view.
  at::Tensor Heads(const at::Tensor& t) const { return t.view({s, b, a, h / a}).permute({1, 2, 0, 3}); }

  at::Tensor Forward(const at::Tensor& x, double p) const {
    const at::Tensor ln1 = at::layer_norm(x, {h}, ln1_w, ln1_b);
    const at::Tensor qkv = at::linear(ln1, qkv_w, qkv_b);  // [s, b, 3h]
    const std::vector<at::Tensor> parts = qkv.split(h, -1);
    const at::Tensor q = Heads(parts[0]), k = Heads(parts[1]), v = Heads(parts[2]);
    const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul(1.0 / std::sqrt(double(h / a)));
    const at::Tensor probs = at::dropout(at::softmax(scores, -1), p, true);
    const at::Tensor context = at::matmul(probs, v).permute({2, 0, 1, 3}).reshape({s, b, h});
    const at::Tensor attn = at::linear(context, proj_w, proj_b);
    const at::Tensor h1 = x + at::dropout(attn, p, true);
    const at::Tensor ln2 = at::layer_norm(h1, {h}, ln2_w, ln2_b);
    const at::Tensor mlp = at::linear(at::gelu(at::linear(ln2, fc1_w, fc1_b)), fc2_w, fc2_b);
    return h1 + at::dropout(mlp, p, true);
  }
};

// Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (2022), eq. 1:
// a layer keeps sbh(34 + 5as/h) bytes of activations with 16-bit activations and 1-byte dropout masks:
// attention 11sbh + 5as^2b (LN output 2, q and k 4, softmax output 2as^2b, its mask as^2b, the masked
// probabilities 2as^2b and v 2, the projection's input 2, its mask 1), MLP 19sbh (fc1 input 2, gelu's
// input 8, fc2's input 8, mask 1), the two layer norms' inputs 4sbh. In PyTorch each term is a tensor
// autograd saves: matmul's reshape of the permuted q, k and v makes contiguous copies that bmm saves
// (2sbh each), the context's permute-reshape is the projection's saved input, and the residual sums
// are the next layer norm's input. The layer's input x is counted as LN1's input in the formula; it
// exists before the forward, and the layer's output (2sbh, the next layer's LN input) takes its place
// in live-after-minus-before. What the formula leaves out: the layer norms' statistics, mean and rstd
// [s, b] each in float on CUDA (layer_norm_cuda), 2 x 2 x 4sb = 16sb bytes.
TEST_F(CardKernelsTest, AGptLayerOnACardKeepsKorthikantisActivations) {
  const int64_t s = 32, b = 2, h = 64, a = 4;
  const GptLayer layer(s, b, h, a,
                       [](at::IntArrayRef sizes) { return at::empty(sizes, kMetaBf16).requires_grad_(true); });
  const at::Tensor x = at::empty({s, b, h}, kMetaBf16).requires_grad_(true);
  const int64_t sbh = s * b * h;
  const int64_t formula = sbh * 34 + 5 * a * s * s * b;  // sbh(34 + 5as/h)
  const int64_t statistics = 2 * 2 * 4 * s * b;
  ASSERT_EQ(formula, 180224);
  ASSERT_EQ(statistics, 1024);
  int64_t saved = 0;
  {
    ScopedKernelTarget cuda(kT4);
    // A card's cuBLAS workspaces are held from the start, outside the ledger (Note [cuBLAS workspaces
    // held from the start]): the layer's matmuls book their outputs alone.
    const int64_t before = Live();
    at::Tensor y = layer.Forward(x, 0.1);
    saved = Live() - before;
    y.sum().backward();  // every kernel's backward runs in cuda mode
  }
  EXPECT_EQ(saved, formula + statistics);
  EXPECT_EQ(saved, 181248);
}

// The same layer in cpu mode reads what the cpu backend reads, as every meta run did before.
TEST_F(CardKernelsTest, AGptLayerInCpuModeReadsWhatCpuReads) {
  const testing::Both m = testing::MeasureOnBoth([](Context& ctx) {
    testing::Parameters params(ctx);
    const GptLayer layer(16, 2, 32, 4, [&](at::IntArrayRef sizes) { return params.Add(sizes, at::kBFloat16); });
    const at::Tensor x = params.Buffer({16, 2, 32}, 0.5).to(at::kBFloat16).requires_grad_(true);
    ctx.Track(params.all());
    for (int64_t iteration : ctx.Iterations()) {
      (void)iteration;
      auto phase = ctx.Phase("forward");
      at::Tensor y = layer.Forward(x, 0.1);
      y.sum().backward();
      params.ZeroGrad();
    }
  });
  testing::ExpectSameAllocations(m);
  EXPECT_EQ(m.meta.kernels, "cpu");
}

// The session sets the options' target on meta, and reports it.
TEST_F(CardKernelsTest, AMeasurementOnMetaRecordsItsKernels) {
  VariantSpec spec;
  spec.name = "card";
  spec.loop.iterations = 1;
  VariantMeasureOptions options;
  options.backend = Backend::kMeta;
  options.kernels = kT4;
  options.kernels_warning = "assumed";
  bool cuda_inside = false;
  const VariantMeasurement m = MeasureWorkload(
      [&](Context& ctx) {
        for (int64_t iteration : ctx.Iterations()) {
          (void)iteration;
          cuda_inside = CurrentKernelTarget().cuda();
          at::Tensor y = at::empty({10}, ctx.options());
        }
      },
      spec, options);
  EXPECT_TRUE(cuda_inside);
  EXPECT_FALSE(CurrentKernelTarget().cuda());
  EXPECT_EQ(m.kernels, "cuda sm_75");
  EXPECT_NE(std::find(m.warnings.begin(), m.warnings.end(), "assumed"), m.warnings.end());
  options.backend = Backend::kCpu;
  EXPECT_EQ(MeasureWorkload(
                [](Context& ctx) {
                  for (int64_t i : ctx.Iterations()) (void)i;
                },
                spec, options)
                .kernels,
            "cpu");
}

}  // namespace
}  // namespace oomguard
