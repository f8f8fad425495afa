// The ops a CNN, a conv1d net, a GroupNorm/SiLU block and an attention block use run forward and
// backward on meta with exactly the cpu backend's allocations: peak, phase peaks, allocation count,
// total bytes allocated, what each phase left live. Each family also has one exact byte count whose
// arithmetic is known (meta_op_bytes_test.cpp), so both backends cannot agree by being equally wrong.
#include <ATen/ATen.h>
#include <ATen/core/Reduction.h>
#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>

#include "tests/meta_ops_harness.h"

namespace oomguard {
namespace {

using testing::Both;
using testing::ExpectSameAllocations;
using testing::MeasureOnBoth;
using testing::Parameters;
using testing::TrainAndEvaluate;

// ---- the models ----

at::Tensor Labels(Context& ctx, int64_t batch) {
  return at::zeros({batch}, ctx.options().dtype(at::kLong));  // cross_entropy's targets
}

// conv2d + batch norm + relu + max pooling, a depthwise conv2d + batch norm + relu + average pooling,
// 1x1 convolutions (one grouped), adaptive average pooling to 2x2, flatten, linear, cross entropy. cpu
// runs the 3x3 convolutions through oneDNN (mkldnn_convolution) and the 1x1 ones of a batch of 2 on one
// thread through Slow2d (the grouped one group by group).
void Cnn(Context& ctx) {
  Parameters p(ctx);
  const at::Tensor w1 = p.Add({8, 3, 3, 3}), b1 = p.Add({8});
  const at::Tensor g1 = p.Add({8}, 1.0), beta1 = p.Add({8}), mean1 = p.Buffer({8}, 0.0), var1 = p.Buffer({8}, 1.0);
  const at::Tensor w2 = p.Add({8, 1, 3, 3}), b2 = p.Add({8});  // depthwise: groups = channels
  const at::Tensor g2 = p.Add({8}, 1.0), beta2 = p.Add({8}), mean2 = p.Buffer({8}, 0.0), var2 = p.Buffer({8}, 1.0);
  const at::Tensor w3 = p.Add({12, 8, 1, 1}), w4 = p.Add({12, 6, 1, 1});  // w4: 1x1 in 2 groups
  const at::Tensor fc = p.Add({10, 12 * 2 * 2}), fc_b = p.Add({10});
  TrainAndEvaluate(ctx, p, [&](bool training) {
    const at::Tensor x = at::randn({2, 3, 16, 16}, ctx.options());
    at::Tensor h = at::conv2d(x, w1, b1, {1, 1}, {1, 1});
    h = at::batch_norm(h, g1, beta1, mean1, var1, training, 0.1, 1e-5, false).relu_();
    h = at::max_pool2d(h, {2, 2});  // [2, 8, 8, 8]
    h = at::conv2d(h, w2, b2, {1, 1}, {1, 1}, {1, 1}, 8);
    h = at::relu(at::batch_norm(h, g2, beta2, mean2, var2, training, 0.1, 1e-5, false));
    h = at::avg_pool2d(h, {2, 2});  // [2, 8, 4, 4]
    h = at::conv2d(h, w3);          // [2, 12, 4, 4]
    h = at::conv2d(h, w4, {}, {1, 1}, at::IntArrayRef{0, 0}, {1, 1}, 2);
    h = at::adaptive_avg_pool2d(h, {2, 2});       // [2, 12, 2, 2]
    h = at::linear(at::flatten(h, 1), fc, fc_b);  // [2, 10]
    return at::cross_entropy_loss(h, Labels(ctx, 2));
  });
}

// conv1d + batch norm (3-d input) + relu + max_pool1d, a depthwise conv1d, adaptive_avg_pool1d,
// flatten, linear. cpu runs conv1d as a conv2d over [N, C, 1, L] (oneDNN), max_pool1d without
// gradients (evaluation) as the output alone.
void Conv1dNet(Context& ctx) {
  Parameters p(ctx);
  const at::Tensor w1 = p.Add({6, 4, 3}), b1 = p.Add({6});
  const at::Tensor g = p.Add({6}, 1.0), beta = p.Add({6}), mean = p.Buffer({6}, 0.0), var = p.Buffer({6}, 1.0);
  const at::Tensor w2 = p.Add({6, 1, 5}), b2 = p.Add({6});
  const at::Tensor fc = p.Add({5, 6 * 2}), fc_b = p.Add({5});
  TrainAndEvaluate(ctx, p, [&](bool training) {
    const at::Tensor x = at::randn({3, 4, 32}, ctx.options());
    at::Tensor h = at::conv1d(x, w1, b1, {1}, {1});
    h = at::relu(at::batch_norm(h, g, beta, mean, var, training, 0.1, 1e-5, false));
    h = at::max_pool1d(h, {2});                   // [3, 6, 16]
    h = at::conv1d(h, w2, b2, {2}, {2}, {1}, 6);  // [3, 6, 8]
    h = at::adaptive_avg_pool1d(h, {2});          // [3, 6, 2]
    h = at::linear(at::flatten(h, 1), fc, fc_b);
    return h.pow(2).mean();
  });
}

// conv2d + group norm + silu, conv2d + group norm + silu_ (in place), adaptive average pooling to 1x1,
// a batch norm over [N, C] and cross entropy; channels_last: the same block on a channels-last input
// (cpu's group norm keeps the layout, and so do oneDNN's convolutions).
void GroupNormSilu(Context& ctx, bool channels_last) {
  Parameters p(ctx);
  const at::Tensor w1 = p.Add({8, 4, 3, 3}), b1 = p.Add({8}), gn1_w = p.Add({8}, 1.0), gn1_b = p.Add({8});
  const at::Tensor w2 = p.Add({8, 8, 3, 3}), gn2_w = p.Add({8}, 1.0), gn2_b = p.Add({8});
  const at::Tensor bn_w = p.Add({8}, 1.0), bn_b = p.Add({8}), mean = p.Buffer({8}, 0.0), var = p.Buffer({8}, 1.0);
  const at::Tensor fc = p.Add({3, 8}), fc_b = p.Add({3});
  TrainAndEvaluate(ctx, p, [&](bool training) {
    at::Tensor x = at::randn({2, 4, 8, 8}, ctx.options());
    if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    at::Tensor h = at::silu(at::group_norm(at::conv2d(x, w1, b1, {1, 1}, {1, 1}), 2, gn1_w, gn1_b));
    h = at::group_norm(at::conv2d(h, w2, {}, {1, 1}, {1, 1}), 4, gn2_w, gn2_b);
    at::silu_(h);
    h = at::adaptive_avg_pool2d(h, {1, 1}).flatten(1);                         // [2, 8]: a mean over H and W
    h = at::batch_norm(h, bn_w, bn_b, mean, var, training, 0.1, 1e-5, false);  // [N, C]: image size 1
    return at::cross_entropy_loss(at::linear(h, fc, fc_b), Labels(ctx, 2));
  });
}

// The ops a CNN's head uses on 4-D activations: layer norm over the last dims, gelu, relu, flatten,
// linear, cross entropy; and an embedding into layer norm.
void CnnHeadOps(Context& ctx) {
  Parameters p(ctx);
  const at::Tensor ln_w = p.Add({6, 6}, 1.0), ln_b = p.Add({6, 6});
  const at::Tensor fc = p.Add({4, 3 * 6 * 6}), fc_b = p.Add({4});
  const at::Tensor table = p.Add({20, 6}), ln2_w = p.Add({6}, 1.0), ln2_b = p.Add({6});
  TrainAndEvaluate(ctx, p, [&](bool) {
    const at::Tensor x = at::randn({2, 3, 6, 6}, ctx.options());
    at::Tensor h = at::relu(at::gelu(at::layer_norm(x, {6, 6}, ln_w, ln_b)));
    h = at::linear(at::flatten(h, 1), fc, fc_b);
    const at::Tensor ids = at::zeros({2, 5}, ctx.options().dtype(at::kLong));
    const at::Tensor e = at::layer_norm(at::embedding(table, ids), {6}, ln2_w, ln2_b);
    return at::cross_entropy_loss(h, Labels(ctx, 2)) + e.mean();
  });
}

// Batch norm in eval mode with gradients (fine-tuning with frozen statistics), over [N, C, H, W] and
// [N, C]: the running statistics normalise, and backward takes the eval formulas.
void FrozenBatchNorm(Context& ctx) {
  Parameters p(ctx);
  const at::Tensor w1 = p.Add({6}, 1.0), b1 = p.Add({6}), mean1 = p.Buffer({6}, 0.0), var1 = p.Buffer({6}, 1.0);
  const at::Tensor fc = p.Add({6, 6 * 3 * 3});
  const at::Tensor w2 = p.Add({6}, 1.0), b2 = p.Add({6}), mean2 = p.Buffer({6}, 0.0), var2 = p.Buffer({6}, 1.0);
  TrainAndEvaluate(ctx, p, [&](bool) {
    const at::Tensor x = at::randn({2, 6, 3, 3}, ctx.options());
    at::Tensor h = at::batch_norm(x, w1, b1, mean1, var1, false, 0.1, 1e-5, false);
    h = at::linear(at::flatten(h, 1), fc);
    return at::batch_norm(h, w2, b2, mean2, var2, false, 0.1, 1e-5, false).pow(2).mean();
  });
}

// ---- the model tests ----

TEST(MetaModelOps, ACnnWithConvBatchNormAndPoolingAllocatesAsOnCpu) {
  const Both m = MeasureOnBoth(Cnn);
  ExpectSameAllocations(m);
  // The two cpu backends the mirror follows (backends/meta/kernels/meta_kernels_conv.cpp).
  EXPECT_TRUE(m.CpuRan("aten::mkldnn_convolution"));
  EXPECT_TRUE(m.CpuRan("aten::_slow_conv2d_forward"));
  EXPECT_TRUE(m.CpuRan("aten::_slow_conv2d_backward"));
}

TEST(MetaModelOps, AConv1dNetAllocatesAsOnCpu) { ExpectSameAllocations(MeasureOnBoth(Conv1dNet)); }

TEST(MetaModelOps, GroupNormAndSiluAllocateAsOnCpu) {
  ExpectSameAllocations(MeasureOnBoth([](Context& ctx) { GroupNormSilu(ctx, false); }));
}

TEST(MetaModelOps, ChannelsLastGroupNormAndConvolutionsAllocateAsOnCpu) {
  ExpectSameAllocations(MeasureOnBoth([](Context& ctx) { GroupNormSilu(ctx, true); }));
}

TEST(MetaModelOps, BatchNormInEvalModeBackpropagatesAsOnCpu) { ExpectSameAllocations(MeasureOnBoth(FrozenBatchNorm)); }

TEST(MetaModelOps, LayerNormGeluReluLinearAndEmbeddingOn4dActivationsAllocateAsOnCpu) {
  ExpectSameAllocations(MeasureOnBoth(CnnHeadOps));
}

// A ViT's tokens: a patch convolution's [batch, channels, tokens] output transposed to [batch,
// tokens, channels] is not contiguous, and neither is anything added to it (a residual keeps the
// strides), so cpu's layer norm copies its input in the forward and again in the backward, where the
// gradient is transposed too. The copies raise the forward's peak by an activation.
TEST(MetaModelOps, LayerNormOfTransposedTokensCopiesItsInputAsOnCpu) {
  const Both m = MeasureOnBoth([](Context& ctx) {
    Parameters p(ctx);
    const at::Tensor w = p.Add({32}, 1.0), b = p.Add({32});
    TrainAndEvaluate(ctx, p, [&](bool) {
      const at::Tensor tokens = at::randn({4, 32, 16}, ctx.options()).transpose(1, 2);  // [4, 16, 32]
      const at::Tensor y = at::layer_norm(tokens + tokens, {32}, w, b);
      return (y * 2).sum();
    });
  });
  ExpectSameAllocations(m);
  EXPECT_TRUE(m.MetaRan("aten::native_layer_norm"));
}

// A bf16 mean (a CNN's global average pool under autocast: adaptive_avg_pool2d(x, 1) is a mean) is
// computed on cpu through a float32 result and a float32 copy of its input.
TEST(MetaModelOps, Bf16MeanComputesInFloat32AsOnCpu) {
  const Both m = MeasureOnBoth([](Context& ctx) {
    Parameters p(ctx);
    const at::Tensor w = p.Add({10, 16});
    TrainAndEvaluate(ctx, p, [&](bool) {
      const at::Tensor x = at::randn({8, 16, 4, 4}, ctx.options().dtype(at::kBFloat16));
      return at::linear(x.mean({2, 3}), w.to(at::kBFloat16)).to(at::kFloat).sum();
    });
  });
  ExpectSameAllocations(m);
}

// Note [mse_loss's reduction on cpu] (backends/meta/kernels/meta_kernels_loss.cpp): a bf16 or fp16 mse_loss with
// reduction mean reduces on cpu through a 0-dim float32 result and a float32 copy of the unreduced loss; sum
// and float32 do not. The forward's peak, to the byte: x and the target (256 bytes each in bf16 or fp16), the
// result's full-size storage and the unreduced loss (256 each), then for a mean the float32 result (4) and
// copy (512).
struct MseCase {
  at::ScalarType dtype;
  int64_t reduction;
  int64_t forward_peak;
};
void PrintTo(const MseCase& c, std::ostream* os) {
  *os << c10::toString(c.dtype) << (c.reduction == at::Reduction::Mean ? " mean" : " sum");
}
class MetaMseLoss : public ::testing::TestWithParam<MseCase> {};
TEST_P(MetaMseLoss, AllocatesAsOnCpu) {
  const MseCase c = GetParam();
  const Both m = MeasureOnBoth([&](Context& ctx) {
    Parameters p(ctx);
    const at::Tensor x = p.Add({8, 16}, c.dtype);
    TrainAndEvaluate(ctx, p, [&](bool) {
      return at::mse_loss(x, at::zeros({8, 16}, ctx.options().dtype(c.dtype)), c.reduction);
    });
  });
  ExpectSameAllocations(m);
  EXPECT_TRUE(m.MetaRan("aten::mse_loss"));
  int forward_phases = 0;
  for (const VariantMeasurement* backend : {&m.cpu, &m.meta}) {
    for (const auto& phase : backend->ledger.phase_peaks) {
      if (phase.phase != "forward") continue;
      EXPECT_EQ(phase.peak_bytes, c.forward_peak) << (backend == &m.cpu ? "cpu" : "meta");
      ++forward_phases;
    }
  }
  EXPECT_EQ(forward_phases, 2);
}
INSTANTIATE_TEST_SUITE_P(MetaModelOps, MetaMseLoss,
                         ::testing::Values(MseCase{at::kBFloat16, at::Reduction::Mean, 4 * 256 + 4 + 512},
                                           MseCase{at::kHalf, at::Reduction::Mean, 4 * 256 + 4 + 512},
                                           MseCase{at::kBFloat16, at::Reduction::Sum, 4 * 256},
                                           MseCase{at::kHalf, at::Reduction::Sum, 4 * 256},
                                           MseCase{at::kFloat, at::Reduction::Mean, 4 * 512}),
                         [](const ::testing::TestParamInfo<MseCase>& info) {
                           return std::string(c10::toString(info.param.dtype)) +
                                  (info.param.reduction == at::Reduction::Mean ? "Mean" : "Sum");
                         });

// ---- attention ----

struct AttentionCase {
  std::string name;
  int mask;  // 0: none, 1: bool, 2: float
  double dropout_p;
  bool causal;
  bool flash;  // what cpu runs: _scaled_dot_product_flash_attention_for_cpu, else the math path
};

// Note [Which attention kernel each backend runs] (backends/meta/kernels/meta_kernels_attention.cpp): without dropout
// cpu runs flash attention for cpu, mask or not, causal or not; with dropout the math path. Meta's own
// composite would always take math; oomguard's AutogradMeta kernel takes cpu's choice.
class MetaAttention : public ::testing::TestWithParam<AttentionCase> {};

// An attention block as a module calls it: q, k, v projections of x, scaled_dot_product_attention,
// an output projection. Evaluation runs without dropout (module.eval()), so flash on cpu.
void AttentionBlock(Context& ctx, const AttentionCase& c) {
  Parameters p(ctx);
  const int64_t batch = 2, heads = 2, seq = 8, head_dim = 4, dim = heads * head_dim;
  const at::Tensor wq = p.Add({dim, dim}), wk = p.Add({dim, dim}), wv = p.Add({dim, dim}), wo = p.Add({dim, dim});
  TrainAndEvaluate(ctx, p, [&](bool training) {
    const at::Tensor x = at::randn({batch, seq, dim}, ctx.options());
    auto split = [&](const at::Tensor& w) {
      return at::linear(x, w).view({batch, seq, heads, head_dim}).transpose(1, 2);
    };
    std::optional<at::Tensor> mask;
    if (c.mask == 1) mask = at::ones({seq, seq}, ctx.options().dtype(at::kBool)).tril();
    if (c.mask == 2) mask = at::zeros({seq, seq}, ctx.options());
    const at::Tensor out =
        at::scaled_dot_product_attention(split(wq), split(wk), split(wv), mask, training ? c.dropout_p : 0.0, c.causal);
    return at::linear(out.transpose(1, 2).reshape({batch, seq, dim}), wo).pow(2).mean();
  });
}

TEST_P(MetaAttention, ScaledDotProductAttentionRunsCpusKernelAndAllocatesAsOnCpu) {
  const AttentionCase c = GetParam();
  const Both m = MeasureOnBoth([&](Context& ctx) { AttentionBlock(ctx, c); });
  ExpectSameAllocations(m);
  const std::string flash = "aten::_scaled_dot_product_flash_attention_for_cpu", math = "aten::_safe_softmax";
  EXPECT_TRUE(m.CpuRan(flash)) << "evaluation runs without dropout";
  EXPECT_EQ(m.CpuRan(math), !c.flash);
  EXPECT_EQ(m.MetaRan(flash), m.CpuRan(flash));
  EXPECT_EQ(m.MetaRan(math), m.CpuRan(math));
}

INSTANTIATE_TEST_SUITE_P(MetaModelOps, MetaAttention,
                         ::testing::Values(AttentionCase{"causal", 0, 0.0, true, true},
                                           AttentionCase{"bool_mask", 1, 0.0, false, true},
                                           AttentionCase{"float_mask", 2, 0.0, false, true},
                                           AttentionCase{"dropout", 0, 0.25, false, false},
                                           AttentionCase{"dropout_causal", 0, 0.25, true, false},
                                           AttentionCase{"dropout_bool_mask", 1, 0.25, false, false}),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });

}  // namespace
}  // namespace oomguard
