// Every layer kind runs forward and backward on meta, with the bytes the cpu backend measures; an op
// with no Meta kernel fails with a message naming the op and the layer.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "backends/meta/kernels/meta_kernels.h"
#include "model/layer_kinds.h"
#include "nn/layer_trace.h"
#include "tests/same_bytes.h"
#include "workload/error_category.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

using LayerKind = LayerKindInfo;

constexpr int64_t kFeatures = 16;

bool Takes(const LayerKind& kind, const std::string& field) { return kind.Takes(field); }

// A layer of `kind` that fits a [batch, 8, 16] activation, with every field it takes set to a
// non-default value where that changes what runs (inplace, dropout, causal masking).
LayerSpec LayerOfKind(const LayerKind& kind, bool inplace, const std::string& attention) {
  LayerSpec l;
  l.kind = kind.name;
  l.in = l.out = l.dim = kFeatures;
  l.hidden = 2 * kFeatures;
  l.heads = 2;
  l.vocab = 50;
  l.attention = attention;
  l.p = Takes(kind, "p") && attention == "math" ? 0.25 : 0.0;  // flash takes no dropout
  l.causal = Takes(kind, "causal");
  l.inplace = inplace;
  return l;
}

LayerSpec Linear() {
  LayerSpec l;
  l.kind = "linear";
  l.in = l.out = kFeatures;
  return l;
}

// linear -> the layer -> linear (embedding comes first: it takes token ids), AdamW, two iterations.
VariantSpec CoverageModel(const LayerKind& kind, bool inplace, const std::string& loss,
                          const std::string& attention = "math") {
  VariantSpec v;
  v.name = kind.name + (inplace ? "_inplace" : "") + (attention == "flash" ? "_flash" : "") + "_" + loss;
  v.seed = 5;
  if (kind.name == "embedding") {
    v.model.layers = {LayerOfKind(kind, inplace, attention), Linear()};
    v.data.dtype = DType::kInt64;
    v.data.vocab = 50;
  } else {
    v.model.layers = {Linear(), LayerOfKind(kind, inplace, attention), Linear()};
  }
  v.data.batch = 3;
  v.data.shape = {8};
  if (kind.name != "embedding") v.data.shape.push_back(kFeatures);
  v.data.classes = kFeatures;
  v.loop.loss = loss;
  v.loop.optimizer.kind = "adamw";
  v.loop.optimizer.weight_decay = 0.01;
  v.loop.eval.batches = 1;
  return v;
}

// Where a gradient meets another (the transformer block's residual sum), meta sums in place as cpu
// does (Note [Gradient sums on meta], backends/meta/kernels/meta_kernels_promote.cpp).
using testing::ExpectSameBytes;

TEST(MetaCoverage, EveryLayerKindRunsForwardAndBackwardWithTheCpuBytes) {
  // As in the runner's children: scratch buffers (flash attention's) are per thread.
  at::set_num_threads(1);
  int covered = 0;
  for (const LayerKind& kind : LayerKinds()) {
    for (const std::string variant : {"plain", "inplace", "flash"}) {
      if (variant == "inplace" && !Takes(kind, "inplace")) continue;
      if (variant == "flash" && !Takes(kind, "attention")) continue;
      const bool inplace = variant == "inplace";
      for (const std::string loss : {"mean", "cross_entropy"}) {
        // Note [The class axis] (workload/loop/cross_entropy.h): cross entropy over a [batch, 8, features]
        // output reads dim 1, which the loader refuses for a layer list's float samples; token ids' logits
        // (the embedding's) keep their classes last.
        if (loss == "cross_entropy" && kind.name != "embedding") continue;
        const VariantSpec spec = CoverageModel(kind, inplace, loss, variant == "flash" ? "flash" : "math");
        SCOPED_TRACE(spec.name);
        const VariantMeasurement cpu = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kCpu});
        const VariantMeasurement meta = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kMeta});
        ASSERT_EQ(Name(cpu.outcome), "pass") << cpu.error;
        ASSERT_EQ(Name(meta.outcome), "pass") << meta.error;
        ExpectSameBytes(cpu, meta);
        ++covered;
      }
    }
  }
  EXPECT_EQ(covered, (14 + 4 + 2) + 1);  // 14 kinds, 4 also in place, 2 also with flash attention; cross entropy on the embedding
}

TEST(MetaCoverage, MseLossAndSgdMomentumMatchToo) {
  at::set_num_threads(1);
  VariantSpec spec = CoverageModel(LayerKinds().front(), false, "mse");
  spec.loop.optimizer.kind = "sgd";
  spec.loop.optimizer.momentum = 0.9;
  const VariantMeasurement cpu = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kCpu});
  const VariantMeasurement meta = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kMeta});
  ASSERT_EQ(Name(meta.outcome), "pass") << meta.error;
  ExpectSameBytes(cpu, meta);
}

// A bf16 or fp16 MLP with each loss, with and without master weights: the same bytes on cpu and meta.
// mse's mean reduces through float32 on cpu (Note [mse_loss's reduction on cpu],
// backends/meta/kernels/meta_kernels_loss.cpp): at batch 8 x 64 outputs, 4 + 4 x 512 = 2052 bytes above meta's
// forward peak until meta mirrored it.
TEST(MetaCoverage, HalfPrecisionLossesMatchWithAndWithoutMasterWeights) {
  at::set_num_threads(1);
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (const std::string loss : {"mse", "mean", "cross_entropy"}) {
      for (const bool master_weights : {false, true}) {
        VariantSpec spec;
        spec.name = loss + (master_weights ? "_master" : "");
        spec.model.dtype = dtype;
        LayerSpec first = Linear(), relu, last = Linear();
        first.in = last.out = 64;
        first.out = last.in = 128;
        relu.kind = "relu";
        spec.model.layers = {first, relu, last};
        spec.data.batch = 8;
        spec.data.shape = {64};
        spec.data.dtype = dtype;
        if (loss == "cross_entropy") spec.data.classes = 64;
        spec.loop.iterations = 2;
        spec.loop.loss = loss;
        spec.loop.optimizer.kind = "adam";
        spec.loop.optimizer.master_weights = master_weights;
        SCOPED_TRACE(spec.name + (dtype == DType::kBFloat16 ? " bfloat16" : " float16"));
        const VariantMeasurement cpu = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kCpu});
        const VariantMeasurement meta = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kMeta});
        ASSERT_EQ(Name(cpu.outcome), "pass") << cpu.error;
        ASSERT_EQ(Name(meta.outcome), "pass") << meta.error;
        ExpectSameBytes(cpu, meta);
      }
    }
  }
}

// logit has no Meta kernel in LibTorch and none from oomguard (no layer uses it).
TEST(MetaCoverage, AMissingForwardKernelNamesTheOpAndTheLayer) {
  RegisterMetaKernels();
  LayerTrace trace;
  try {
    trace.EnterLayer("2:custom");
    (void)at::logit(at::empty({4, 8}, at::TensorOptions().device(at::kMeta)));
    FAIL() << "logit ran on meta: pick another op without a Meta kernel for this test";
  } catch (const std::exception& e) {
    EXPECT_EQ(Name(OutcomeOfException(e)), "error:meta-kernel-missing");
    EXPECT_EQ(DescribeError(e, trace.Locate()),
              "aten::logit has no Meta kernel (in the forward of layer 2:custom): LibTorch ships none and oomguard "
              "registers none, so meta does not mirror it. Run this scenario with --backend cpu for its bytes.");
  }
}

// glu has a Meta kernel, glu_backward has none: the failure is in backward, in the node glu created.
TEST(MetaCoverage, AMissingBackwardKernelNamesTheNodeAndTheLayerThatCreatedIt) {
  RegisterMetaKernels();
  LayerTrace trace;
  const at::Tensor x = at::empty({4, 8}, at::TensorOptions().device(at::kMeta)).requires_grad_(true);
  trace.EnterLayer("0:first");
  at::Tensor h = at::tanh(x);
  trace.Exit();
  trace.EnterLayer("1:gated");
  at::Tensor y = at::glu(h);
  trace.Exit();
  try {
    y.sum().backward();
    FAIL() << "glu_backward ran on meta: pick another op without a Meta kernel for this test";
  } catch (const std::exception& e) {
    EXPECT_EQ(Name(OutcomeOfException(e)), "error:meta-kernel-missing");
    EXPECT_EQ(trace.Locate(), "in the backward of layer 1:gated, node GluBackward0");
    EXPECT_NE(DescribeError(e, trace.Locate()).find("aten::glu_backward"), std::string::npos);
  }
}

}  // namespace
}  // namespace oomguard
