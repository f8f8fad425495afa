// One op at a time on leaf inputs, on cpu and meta: what the forward keeps is a number whose arithmetic
// is known (the op's output, what its backward node saves of its own outputs, the 4-byte loss), so both
// backends cannot agree by being equally wrong (the models themselves: meta_model_ops_test.cpp).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>

#include "tests/meta_ops_harness.h"

namespace oomguard {
namespace {

using testing::Parameters;

// One op on leaf inputs made in setup: forward keeps the op's output, what its backward node saves of
// the op's own outputs, and the 4-byte loss; the same number on cpu and meta.
using Op = std::function<at::Tensor()>;
using MakeOp = std::function<Op(Parameters&)>;  // makes the inputs (in setup) and returns the op

int64_t ForwardSavedBytes(Backend backend, const MakeOp& make_op) {
  const VariantMeasurement m = testing::MeasureOneIteration(backend, [&](Context& ctx) {
    Parameters p(ctx);
    const Op op = make_op(p);
    ctx.Track(p.all());
    for (int64_t i : ctx.Iterations()) {
      (void)i;
      at::Tensor y, loss;
      {
        auto phase = ctx.Phase("forward");
        y = op();
        loss = y.sum();
      }
      auto phase = ctx.Phase("backward");
      loss.backward();
    }
  });
  EXPECT_EQ(Name(m.outcome), "pass") << m.error;
  return m.forward_saved_bytes.value_or(-1);
}

void ExpectForwardSavedBytes(int64_t expected, const MakeOp& make_op) {
  EXPECT_EQ(ForwardSavedBytes(Backend::kCpu, make_op), expected) << "cpu";
  EXPECT_EQ(ForwardSavedBytes(Backend::kMeta, make_op), expected) << "meta";
}

constexpr int64_t kLoss = 4;

TEST(MetaModelOpsBytes, Conv2dAndConv1dKeepTheirOutput) {
  // [2, 4, 8, 8] floats; the node saves the (leaf) input and weight.
  ExpectForwardSavedBytes(2 * 4 * 8 * 8 * 4 + kLoss, [](Parameters& p) -> Op {
    const at::Tensor x = p.Add({2, 3, 8, 8}), w = p.Add({4, 3, 3, 3}), b = p.Add({4});
    return [=] { return at::conv2d(x, w, b, {1, 1}, {1, 1}); };
  });
  // [2, 6, 16]: a view of cpu's [2, 6, 1, 16] output.
  ExpectForwardSavedBytes(2 * 6 * 16 * 4 + kLoss, [](Parameters& p) -> Op {
    const at::Tensor x = p.Add({2, 4, 16}), w = p.Add({6, 4, 3}), b = p.Add({6});
    return [=] { return at::conv1d(x, w, b, {1}, {1}); };
  });
}

TEST(MetaModelOpsBytes, TransposedConvolutionsKeepTheirOutput) {
  // A U-Net's up block (oneDNN's deconvolution on cpu): [2, 32, 32, 32] floats.
  ExpectForwardSavedBytes(2 * 32 * 32 * 32 * 4 + kLoss, [](Parameters& p) -> Op {
    const at::Tensor x = p.Add({2, 64, 16, 16}), w = p.Add({64, 32, 2, 2}), b = p.Add({32});
    return [=] { return at::conv_transpose2d(x, w, b, 2); };
  });
  // [2, 8, 40]: (20 - 1) * 2 - 2 * 1 + 4 = 40, a view of cpu's [2, 8, 1, 40] output.
  ExpectForwardSavedBytes(2 * 8 * 40 * 4 + kLoss, [](Parameters& p) -> Op {
    const at::Tensor x = p.Add({2, 16, 20}), w = p.Add({16, 8, 4}), b = p.Add({8});
    return [=] { return at::conv_transpose1d(x, w, b, 2, 1); };
  });
  // float64 (SlowTranspose2d on cpu), output_padding 1: [2, 8, 16, 16] doubles and an 8-byte loss.
  ExpectForwardSavedBytes(2 * 8 * 16 * 16 * 8 + 8, [](Parameters& p) -> Op {
    const at::Tensor x = p.Add({2, 16, 8, 8}, at::kDouble), w = p.Add({16, 8, 3, 3}, at::kDouble);
    return [=] { return at::conv_transpose2d(x, w, {}, 2, 1, 1); };
  });
}

TEST(MetaModelOpsBytes, BatchNormKeepsItsOutputAndTheBatchStatistics) {
  // [4, 6, 5, 5] floats and save_mean, save_invstd [6].
  ExpectForwardSavedBytes(4 * 6 * 5 * 5 * 4 + 2 * 6 * 4 + kLoss, [](Parameters& p) -> Op {
    const at::Tensor x = p.Add({4, 6, 5, 5}), w = p.Add({6}, 1.0), b = p.Add({6});
    const at::Tensor mean = p.Buffer({6}, 0.0), var = p.Buffer({6}, 1.0);
    return [=] { return at::batch_norm(x, w, b, mean, var, true, 0.1, 1e-5, false); };
  });
}

TEST(MetaModelOpsBytes, PoolingKeepsItsOutputAndMaxPoolingItsIndices) {
  // [2, 3, 4, 4] floats and int64 indices.
  ExpectForwardSavedBytes(2 * 3 * 4 * 4 * (4 + 8) + kLoss, [](Parameters& p) -> Op {
    const at::Tensor x = p.Add({2, 3, 8, 8});
    return [=] { return at::max_pool2d(x, {2, 2}); };
  });
  ExpectForwardSavedBytes(2 * 3 * 2 * 2 * 4 + kLoss, [](Parameters& p) -> Op {
    const at::Tensor x = p.Add({2, 3, 8, 8});
    return [=] { return at::adaptive_avg_pool2d(x, {2, 2}); };
  });
}

TEST(MetaModelOpsBytes, GroupNormKeepsItsOutputAndTheGroupStatisticsAndSiluItsOutput) {
  // [2, 6, 4, 4] floats and mean, rstd [2, 3].
  ExpectForwardSavedBytes(2 * 6 * 4 * 4 * 4 + 2 * 2 * 3 * 4 + kLoss, [](Parameters& p) -> Op {
    const at::Tensor x = p.Add({2, 6, 4, 4}), w = p.Add({6}, 1.0), b = p.Add({6});
    return [=] { return at::group_norm(x, 3, w, b); };
  });
  ExpectForwardSavedBytes(2 * 6 * 4 * 4 * 4 + kLoss, [](Parameters& p) -> Op {
    const at::Tensor x = p.Add({2, 6, 4, 4});
    return [=] { return at::silu(x); };
  });
}

TEST(MetaModelOpsBytes, FlashAttentionKeepsItsOutputAndTheLogsumexp) {
  // [2, 2, 8, 4] floats and the logsumexp [2, 2, 8] floats.
  ExpectForwardSavedBytes(2 * 2 * 8 * 4 * 4 + 2 * 2 * 8 * 4 + kLoss, [](Parameters& p) -> Op {
    const at::Tensor q = p.Add({2, 2, 8, 4}), k = p.Add({2, 2, 8, 4}), v = p.Add({2, 2, 8, 4});
    return [=] { return at::scaled_dot_product_attention(q, k, v, {}, 0.0, true); };
  });
}

TEST(MetaModelOpsBytes, Bf16MathAttentionComputesInFloatAsCpusDoes) {
  // Note [The math attention computes in float on cpu too]: with dropout cpu takes the math path, which upcasts
  // bf16 q, k, v to float. B = H = 2, L = S = 8, E = 4: [B, H, L, E] is 128 elements, [B, H, L, S] 256. The
  // forward keeps, in float: the scaled query and the scaled, transposed key (the first matmul's operands), the
  // softmax's output (its backward reads it), dropout's noise (the product's backward), the dropped weights and
  // the upcast value (the second matmul's operands); and the bf16 output. The bf16 copies of the leaves and the
  // weights' bf16 copy are freed inside the op. Before the fix meta kept q, k, v and the weights in bf16.
  constexpr int64_t kQueryLike = 2 * 2 * 8 * 4, kScores = 2 * 2 * 8 * 8;
  ExpectForwardSavedBytes(4 * (kQueryLike + kQueryLike + kScores + kScores + kScores + kQueryLike) +
                              2 * kQueryLike + 2,  // the loss: a bf16 sum
                          [](Parameters& p) -> Op {
                            const at::Tensor q = p.Add({2, 2, 8, 4}), k = p.Add({2, 2, 8, 4}), v = p.Add({2, 2, 8, 4});
                            return [=] {
                              return at::scaled_dot_product_attention(q.to(at::kBFloat16), k.to(at::kBFloat16),
                                                                      v.to(at::kBFloat16), {}, 0.1);
                            };
                          });
}

TEST(MetaModelOpsBytes, RollKeepsItsOutputOnMetaAsOnCpu) {
  // Swin's shifted windows: torch.roll over two dimensions of a transposed input (meta_kernels.cpp's RollMeta, as
  // roll_cpu: one dimension at a time, the first roll's result freed). The forward keeps the output (a cat of
  // two narrowed views: contiguous) and the loss; RollBackward saves no tensor.
  ExpectForwardSavedBytes(2 * 8 * 8 * 4 * 4 + kLoss, [](Parameters& p) -> Op {
    const at::Tensor x = p.Add({2, 4, 8, 8});
    return [=] { return at::roll(x.transpose(1, 3), {3, -2}, {1, 2}); };
  });
}

}  // namespace
}  // namespace oomguard
