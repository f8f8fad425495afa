// The losses besides cross entropy and mse on cpu and on meta's cpu mirrors (Note [Losses on a card],
// backends/meta/kernels/meta_kernels_loss.cpp): a training step and an evaluation forward through binary
// cross entropy (with and without logits), smooth L1, Huber, L1, KL divergence and log_sigmoid allocate
// the same bytes, peaks per phase and allocation counts on both, in fp32 and bf16. cpu is eager
// PyTorch: this is the independent check of the mirrors cpu mode runs (a card's differences are
// tests/card_loss_test.cpp's).
#include <ATen/ATen.h>
#include <ATen/core/Reduction.h>
#include <gtest/gtest.h>

#include "tests/meta_ops_harness.h"

namespace oomguard {
namespace {

using testing::Both;
using testing::MeasureOnBoth;
using testing::Parameters;

// Each loss on a [8, 16] parameter and a target in [0, 1) made in the forward; `dtype` for both. Once
// more binary_cross_entropy_with_logits, with weight and pos_weight and a target that requires grad (its
// node's target gradient; Note [binary_cross_entropy_with_logits's backward on meta]).
WorkloadFunction Losses(at::ScalarType dtype) {
  return [dtype](Context& ctx) {
    Parameters p(ctx);
    const at::Tensor x = p.Add({8, 16}, dtype), soft = p.Add({8, 16}, dtype);  // soft: a target that learns
    const at::Tensor weight = p.Buffer({16}, 0.5).to(dtype), pos_weight = p.Buffer({16}, 2.0).to(dtype);
    testing::TrainAndEvaluate(ctx, p, [&](bool) {
      const at::Tensor t = at::rand({8, 16}, ctx.options().dtype(dtype));
      at::Tensor loss = at::binary_cross_entropy(at::sigmoid(x), t) + at::binary_cross_entropy_with_logits(x, t);
      loss = loss + at::binary_cross_entropy(at::sigmoid(x), t, {}, at::Reduction::Sum);
      loss = loss + at::smooth_l1_loss(x, t) + at::huber_loss(x, t, at::Reduction::Sum) + at::l1_loss(x, t);
      loss = loss + at::kl_div(at::log_softmax(x, -1), t, at::Reduction::Sum) + at::log_sigmoid(x).sum();
      loss = loss + at::binary_cross_entropy_with_logits(x, soft, weight, pos_weight, at::Reduction::Sum);
      return loss.to(at::kFloat);
    });
  };
}

TEST(MetaLossOps, TheOtherLossesAllocateAsOnCpu) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const Both m = MeasureOnBoth(Losses(dtype));
    testing::ExpectSameAllocations(m);
    EXPECT_TRUE(m.CpuRan("aten::binary_cross_entropy"));
    EXPECT_TRUE(m.CpuRan("aten::log_sigmoid_forward"));
    EXPECT_TRUE(m.CpuRan("aten::huber_loss_backward"));
    EXPECT_TRUE(m.MetaRan("aten::smooth_l1_loss_backward"));
  }
}

}  // namespace
}  // namespace oomguard
