// The ops users met on meta with bytes other than cpu's (issue #31, item 5), forward and backward with
// an evaluation, on cpu and meta: exactly the cpu backend's allocations, with the cpu kernel each
// mirrors named (the models whole: tests/meta_corpus.py).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <functional>
#include <optional>

#include "tests/meta_ops_harness.h"

namespace oomguard {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): the harness, meta_ops_harness.h

// Exactly cpu's bytes, allocation by allocation. These models use a tensor twice or more: meta sums the
// gradients in place, as cpu does (Note [Gradient sums on meta], backends/meta/kernels/meta_kernels_promote.cpp).
void ExpectCpusBytes(const Both& m) {
  ASSERT_EQ(Name(m.cpu.outcome), "pass") << m.cpu.error;
  ASSERT_EQ(Name(m.meta.outcome), "pass") << m.meta.error;
  ExpectSameBytes(m.cpu, m.meta);
}

// MobileNetV3's activations (hardswish; hardsigmoid is structured and had its Meta kernel) and
// MobileNetV2's ReLU6 (hardtanh), out of place and in place.
TEST(MetaUserOps, HardswishAndRelu6AllocateAsOnCpu) {
  const Both m = MeasureOnBoth([](Context& ctx) {
    Parameters p(ctx);
    const at::Tensor w1 = p.Add({16, 8}), w2 = p.Add({4, 16});
    TrainAndEvaluate(ctx, p, [&](bool) {
      const at::Tensor x = at::randn({6, 8}, ctx.options());
      at::Tensor h = at::hardswish(at::linear(x, w1));
      h = at::hardtanh(h, 0.0, 6.0) * at::hardsigmoid(h) * 2;
      return at::linear(at::hardtanh_(h, 0.0, 6.0), w2).pow(2).mean();
    });
  });
  ExpectCpusBytes(m);
  EXPECT_TRUE(m.CpuRan("aten::hardswish_backward"));
  EXPECT_TRUE(m.CpuRan("aten::hardtanh_backward"));
}

// F.interpolate at the sizes of a U-Net's decoder: cpu's channels-last kernel (output height + width
// <= 128) copies the input and the output to channels-last; its generic kernel (larger outputs) keeps
// index and weight tensors per dimension; the backward copies a non-contiguous gradient (here the
// gradient of a slice is, after its backward).
void Interpolations(Context& ctx, int64_t side) {
  Parameters p(ctx);
  const at::Tensor w = p.Add({4, 3, 3, 3});
  TrainAndEvaluate(ctx, p, [&](bool) {
    const at::Tensor x = at::randn({2, 3, side, side}, ctx.options());
    const at::Tensor h = at::conv2d(x, w, {}, {1, 1}, {1, 1});  // [2, 4, side, side]
    const std::vector<int64_t> up = {2 * side, 2 * side};
    const at::Tensor bilinear = at::upsample_bilinear2d(h, up, false);
    const at::Tensor nearest = at::upsample_nearest2d(h, up);
    const at::Tensor narrow = at::upsample_bilinear2d(h.narrow(1, 0, 3), up, true);  // 3 channels, strided
    return (bilinear + nearest).narrow(2, 0, side).pow(2).mean() + narrow.mean();
  });
}

TEST(MetaUserOps, SmallInterpolationsTakeTheChannelsLastKernelAndAllocateAsOnCpu) {
  const Both m = MeasureOnBoth([](Context& ctx) { Interpolations(ctx, 16); });
  ExpectCpusBytes(m);
  EXPECT_TRUE(m.MetaRan("aten::upsample_bilinear2d_backward"));
  EXPECT_TRUE(m.MetaRan("aten::upsample_nearest2d_backward"));
}

TEST(MetaUserOps, LargeInterpolationsTakeTheGenericKernelAndAllocateAsOnCpu) {
  ExpectCpusBytes(MeasureOnBoth([](Context& ctx) { Interpolations(ctx, 48); }));
}

// A hand-written dropout in bf16: the bool mask (1 byte an element) is cast to bf16 by cpu's
// TensorIterator before the product (Note [Operands promoted on cpu]); so is a float32 tensor added to
// a bf16 one's float32 result, and an int64 tensor divided.
TEST(MetaUserOps, MixedDtypeArithmeticCastsItsOperandsAsOnCpu) {
  const Both m = MeasureOnBoth([](Context& ctx) {
    Parameters p(ctx);
    const at::Tensor w = p.Add({32, 16});
    TrainAndEvaluate(ctx, p, [&](bool training) {
      const at::Tensor x = at::randn({8, 16}, ctx.options());
      at::Tensor h = at::linear(x, w).to(at::kBFloat16);
      if (training) h = h * (at::rand({8, 32}, ctx.options()) > 0.1) / 0.9;
      const at::Tensor counts = at::ones({8, 32}, ctx.options().dtype(at::kLong));
      at::Tensor y = at::randn({8, 32}, ctx.options()) + h;  // float32 + bf16
      y = y.sub(h).mul_(h) / counts;
      return y.pow(2).mean();
    });
  });
  ExpectCpusBytes(m);
}

// nn.MultiheadAttention's input projection (batch_first): linear of the transposed [seq, batch, features]
// view runs matmul and adds the bias in place on cpu; at::native::linear adds it out of place for a
// meta tensor.
TEST(MetaUserOps, LinearOfATransposedInputAddsItsBiasInPlaceAsOnCpu) {
  const Both m = MeasureOnBoth([](Context& ctx) {
    Parameters p(ctx);
    const at::Tensor w = p.Add({24, 8}), b = p.Add({24});
    TrainAndEvaluate(ctx, p, [&](bool) {
      const at::Tensor x = at::randn({2, 6, 8}, ctx.options()).transpose(0, 1);  // [6, 2, 8]
      return at::linear(x, w, b).pow(2).mean();
    });
  });
  ExpectSameAllocations(m);
}

// A function whose backward runs a backward of its own, as a reentrant checkpoint does: its graph task
// starts inside a node of the outer one.
struct RecomputedSquare : torch::autograd::Function<RecomputedSquare> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    return x * x;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Tensor y;
    {
      at::AutoGradMode grad_on(true);
      const at::Tensor h = x * 3;
      y = h * h + h;  // h used twice: a gradient sum inside the inner backward
    }
    return torch::autograd::grad({y}, {x}, {grads[0]});
  }
};

// Note [Gradient sums on meta]: where two gradients meet, autograd's engine sums them in place on cpu
// and, left alone, out of place on meta: one allocation more a sum (a residual's, [6, 16] floats here),
// before meta's add made the engine's sum in place; inside a nested backward too.
TEST(MetaUserOps, GradientSumsAreMadeInPlaceAsOnCpuInNestedBackwardsToo) {
  const Both m = MeasureOnBoth([](Context& ctx) {
    Parameters p(ctx);
    const at::Tensor w1 = p.Add({16, 8}), w2 = p.Add({16, 16});
    TrainAndEvaluate(ctx, p, [&](bool) {
      const at::Tensor x = at::randn({6, 8}, ctx.options());
      const at::Tensor h = at::linear(x, w1);
      const at::Tensor residual = h + at::relu(at::linear(h, w2));  // h's gradient: two contributions
      return RecomputedSquare::apply(residual).mean();
    });
  });
  ExpectCpusBytes(m);
}

// nn.MultiheadAttention's and nn.TransformerEncoderLayer's fused fast path, which both backends take in
// evaluation under no_grad (nn/torchscript/meta_fast_path.h): cpu's own kernels run on meta (Note [The fused
// attention ops run cpu's own code on meta], backends/meta/kernels/meta_kernels_transformer.cpp). The padding
// mask is the modules' merged mask (float [B, T], mask_type 1), which _masked_softmax reads as bool;
// without a mask the scores are soft-maxed in place. Embedding 16, 2 heads, feed-forward 32.
struct EncoderWeights {
  explicit EncoderWeights(Parameters& p)
      : qkv_w(p.Add({48, 16})),
        qkv_b(p.Add({48})),
        proj_w(p.Add({16, 16})),
        proj_b(p.Add({16})),
        norm1_w(p.Add({16})),
        norm1_b(p.Add({16})),
        norm2_w(p.Add({16})),
        norm2_b(p.Add({16})),
        ffn1_w(p.Add({32, 16})),
        ffn1_b(p.Add({32})),
        ffn2_w(p.Add({16, 32})),
        ffn2_b(p.Add({16})) {}
  at::Tensor qkv_w, qkv_b, proj_w, proj_b, norm1_w, norm1_b, norm2_w, norm2_b, ffn1_w, ffn1_b, ffn2_w, ffn2_b;
};

// A training forward that uses every parameter once (the fused ops have no backward).
at::Tensor TrainOn(const at::Tensor& x, const std::vector<at::Tensor>& params) {
  at::Tensor loss = x.sum();
  for (const at::Tensor& w : params) loss = loss + w.pow(2).sum();
  return loss;
}

std::optional<at::Tensor> PaddingMask(Context& ctx, bool padding_mask) {
  return padding_mask ? std::optional<at::Tensor>(at::zeros({3, 5}, ctx.options())) : std::nullopt;
}

// Training touches every weight; evaluation runs `evaluate` on a [3, 5, 16] input.
using Evaluate = std::function<at::Tensor(Context&, const EncoderWeights&, const at::Tensor& x)>;
Both MeasureEvaluation(const Evaluate& evaluate) {
  return MeasureOnBoth([&](Context& ctx) {
    Parameters p(ctx);
    const EncoderWeights w(p);
    TrainAndEvaluate(ctx, p, [&](bool training) {
      const at::Tensor x = at::randn({3, 5, 16}, ctx.options());
      return training ? TrainOn(x, p.all()) : evaluate(ctx, w, x);
    });
  });
}

TEST(MetaUserOps, MultiheadAttentionsFastPathAllocatesAsOnCpu) {
  for (const bool need_weights : {false, true}) {
    for (const bool padding_mask : {false, true}) {
      SCOPED_TRACE(std::string(need_weights ? "need_weights" : "no weights") + (padding_mask ? ", padding mask" : ""));
      const Both m = MeasureEvaluation([&](Context& ctx, const EncoderWeights& w, const at::Tensor& x) {
        auto [out, weights] = at::_native_multi_head_attention(x, x, x, 16, 2, w.qkv_w, w.qkv_b, w.proj_w, w.proj_b,
                                                               PaddingMask(ctx, padding_mask), need_weights, true,
                                                               padding_mask ? std::optional<int64_t>(1) : std::nullopt);
        return need_weights ? out.mean() + weights.mean() : out.mean();
      });
      ExpectCpusBytes(m);
      EXPECT_TRUE(m.MetaRan("aten::_native_multi_head_attention"));
      EXPECT_EQ(m.MetaRan("aten::_masked_softmax"), padding_mask);
      EXPECT_EQ(m.CpuRan("aten::_masked_softmax"), padding_mask);
    }
  }
}

TEST(MetaUserOps, TransformerEncoderLayersFastPathAllocatesAsOnCpu) {
  for (const bool norm_first : {false, true}) {
    for (const bool padding_mask : {false, true}) {
      SCOPED_TRACE(std::string(norm_first ? "norm first, gelu" : "norm last, relu") +
                   (padding_mask ? ", padding mask" : ""));
      const Both m = MeasureEvaluation([&](Context& ctx, const EncoderWeights& w, const at::Tensor& x) {
        return at::_transformer_encoder_layer_fwd(
                   x, 16, 2, w.qkv_w, w.qkv_b, w.proj_w, w.proj_b, /*use_gelu=*/norm_first, norm_first, 1e-5, w.norm1_w,
                   w.norm1_b, w.norm2_w, w.norm2_b, w.ffn1_w, w.ffn1_b, w.ffn2_w, w.ffn2_b,
                   PaddingMask(ctx, padding_mask), padding_mask ? std::optional<int64_t>(1) : std::nullopt)
            .mean();
      });
      ExpectCpusBytes(m);
      EXPECT_TRUE(m.MetaRan("aten::_transformer_encoder_layer_fwd"));
      EXPECT_TRUE(m.MetaRan("aten::_native_multi_head_attention"));
    }
  }
}

}  // namespace
}  // namespace oomguard
