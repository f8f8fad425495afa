// Transposed convolution (nn.ConvTranspose1d/2d) on meta, forward and backward with an evaluation:
// exactly the cpu backend's allocations, whether cpu runs oneDNN's deconvolution (MkldnnTranspose:
// float32) or SlowTranspose2d (float64), for the shapes a U-Net's upsampling uses and the options cpu
// takes (output_padding, groups, dilation, no bias, 1-d). 3-d ones are refused, saying so.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/meta_ops_harness.h"

namespace oomguard {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): the harness, meta_ops_harness.h

struct TransposedConv {
  std::string name;
  std::vector<int64_t> input;   // [N, C_in, (H,) W]
  std::vector<int64_t> weight;  // [C_in, C_out / groups, (kh,) kw]
  int64_t stride, padding, output_padding, groups, dilation;
  bool bias;
  at::ScalarType dtype;
  bool slow;                   // cpu runs SlowTranspose2d rather than oneDNN
  bool channels_last = false;  // the input in channels-last memory (2-d only)
};

void PrintTo(const TransposedConv& c, std::ostream* os) { *os << c.name; }

class MetaConvTranspose : public ::testing::TestWithParam<TransposedConv> {};

// The transposed convolution, a square and a mean as the loss.
Both MeasureTransposedConv(const TransposedConv& c) {
  return MeasureOnBoth([&c](Context& ctx) {
    Parameters p(ctx);
    const at::TensorOptions options = ctx.options().dtype(c.dtype);
    const at::Tensor w = p.Add(c.weight, c.dtype);
    at::Tensor b;
    if (c.bias) b = p.Add({c.weight[1] * c.groups}, c.dtype);
    const bool one_d = c.input.size() == 3;
    TrainAndEvaluate(ctx, p, [&](bool) {
      at::Tensor x = at::randn(c.input, options);
      if (c.channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
      const at::Tensor y =
          one_d ? at::conv_transpose1d(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation)
                : at::conv_transpose2d(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation);
      return (y * y).mean();
    });
  });
}

TEST_P(MetaConvTranspose, AllocatesAsOnCpuForwardAndBackward) {
  const TransposedConv& c = GetParam();
  const Both m = MeasureTransposedConv(c);
  ExpectSameAllocations(m);
  EXPECT_EQ(m.CpuRan("aten::slow_conv_transpose2d"), c.slow);
  EXPECT_TRUE(m.MetaRan("aten::convolution_backward"));
}

INSTANTIATE_TEST_SUITE_P(
    MetaConvTranspose, MetaConvTranspose,
    ::testing::Values(
        // A U-Net's up block: ConvTranspose2d(64, 32, kernel 2, stride 2) doubling 16x16.
        TransposedConv{"UNetUpBlock", {2, 64, 16, 16}, {64, 32, 2, 2}, 2, 0, 0, 1, 1, true, at::kFloat, false},
        TransposedConv{"Kernel3Stride2Padding1OutputPadding1",
                       {2, 16, 8, 8},
                       {16, 8, 3, 3},
                       2,
                       1,
                       1,
                       1,
                       1,
                       true,
                       at::kFloat,
                       false},
        TransposedConv{"TwoGroups", {2, 16, 8, 8}, {16, 4, 3, 3}, 2, 1, 1, 2, 1, true, at::kFloat, false},
        TransposedConv{"NoBias", {2, 16, 8, 8}, {16, 8, 3, 3}, 2, 1, 1, 1, 1, false, at::kFloat, false},
        TransposedConv{"Dilation2", {2, 16, 8, 8}, {16, 8, 3, 3}, 1, 0, 0, 1, 2, true, at::kFloat, false},
        TransposedConv{"OneD", {2, 16, 20}, {16, 8, 4}, 2, 1, 0, 1, 1, true, at::kFloat, false},
        TransposedConv{"ChannelsLast", {2, 16, 8, 8}, {16, 8, 3, 3}, 2, 1, 1, 1, 1, true, at::kFloat, false, true},
        TransposedConv{
            "ChannelsLastTwoGroups", {2, 16, 8, 8}, {16, 4, 3, 3}, 2, 1, 1, 2, 1, true, at::kFloat, false, true},
        TransposedConv{"Float64Slow", {2, 16, 8, 8}, {16, 8, 3, 3}, 2, 1, 1, 1, 1, true, at::kDouble, true},
        TransposedConv{"Float64SlowTwoGroups", {2, 16, 8, 8}, {16, 4, 3, 3}, 2, 1, 1, 2, 1, true, at::kDouble, true},
        TransposedConv{"Float64Slow1x1", {2, 16, 8, 8}, {16, 8, 1, 1}, 1, 0, 0, 1, 1, false, at::kDouble, true},
        TransposedConv{"Float64SlowOneD", {2, 16, 20}, {16, 8, 4}, 2, 1, 0, 1, 1, true, at::kDouble, true},
        TransposedConv{
            "Float64SlowChannelsLast", {2, 16, 8, 8}, {16, 8, 3, 3}, 2, 1, 1, 1, 1, true, at::kDouble, true, true}),
    [](const ::testing::TestParamInfo<TransposedConv>& info) { return info.param.name; });

// 3-d transposed convolution stays refused on meta, naming what is not mirrored; cpu runs it.
TEST(MetaConvTranspose, A3dTransposedConvolutionIsRefusedSayingSo) {
  const Both m = MeasureOnBoth([](Context& ctx) {
    Parameters p(ctx);
    const at::Tensor w = p.Add({4, 2, 2, 2, 2});
    TrainAndEvaluate(ctx, p, [&](bool) {
      const at::Tensor y = at::conv_transpose3d(at::randn({1, 4, 3, 3, 3}, ctx.options()), w, {}, 2);
      return (y * y).mean();
    });
  });
  EXPECT_EQ(Name(m.cpu.outcome), "pass") << m.cpu.error;
  EXPECT_EQ(Name(m.meta.outcome), "error:meta-kernel-missing");
  EXPECT_NE(m.meta.error.find("a 3-d transposed convolution (aten::convolution) is not mirrored on meta: oomguard "
                              "mirrors 1-d and 2-d convolutions only"),
            std::string::npos)
      << m.meta.error;
}

}  // namespace
}  // namespace oomguard
