// Pooling and interpolation as a card allocates them (Note [Pooling on a card],
// backends/meta/kernels/meta_kernels_pool.cpp; Note [Interpolation on a card], meta_kernels_resize.cpp):
// each expectation derived from PyTorch 2.11's CUDA host code, beside what cpu's kernels allocate.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <tuple>

#include "backends/meta/kernel_target.h"
#include "tests/card_mode_harness.h"

namespace oomguard::testing {
namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;
const KernelTarget kT4 = KernelTarget::Cuda(75);
const KernelTarget kCpu = KernelTarget::Cpu();

class CardPool : public CardModeTest {
 protected:
  void SetUp() override {
    CardModeTest::SetUp();
    at::set_num_threads(1);  // cpu's bilinear kernel choice reads the thread count
  }
};

at::Tensor ChannelsLast(at::IntArrayRef sizes, at::ScalarType dtype = at::kFloat) {
  return at::empty(sizes, kMeta.dtype(dtype)).contiguous(kChannelsLast);
}

// MaxPooling.cpp: off the cpu max_pool1d is max_pool1d_with_indices, gradients or not: a [2, 4, 16]
// input pooled by 2 makes a float output [2, 4, 1, 8] (256 bytes) and int64 indices (512), which die
// with the call. cpu computes the output alone.
TEST_F(CardPool, MaxPool1dOnACardAllocatesItsIndices) {
  const at::Tensor x = at::empty({2, 4, 16}, kMeta);
  const auto pool = [&] { at::Tensor out = at::max_pool1d(x, {2}); };
  const Measured card = MeasureWithKernels(kT4, pool);
  EXPECT_EQ(card.allocated, 256 + 512);
  EXPECT_EQ(card.peak, 256 + 512);
  const Measured cpu = MeasureWithKernels(kCpu, pool);
  EXPECT_EQ(cpu.allocated, 256);
}

// AdaptiveMaxPooling2d.cu works in NCHW. A channels-last [2, 8, 6, 6] float input (2304 bytes) pooled
// to 3x3: the structured output (576) and int64 indices (1152), channels-last; then contiguous ones to
// compute into (576 + 1152) and input.contiguous(), an NCHW copy (2304), all freed after copying back.
// Backward: grad_input like the input (2304, channels-last), grad_output and indices made contiguous
// (576 + 1152), and a contiguous grad_input to compute into (2304). cpu works in channels-last in place.
TEST_F(CardPool, AdaptiveMaxPool2dOnACardComputesChannelsLastInNchw) {
  const at::Tensor x = ChannelsLast({2, 8, 6, 6});
  at::Tensor out, indices;
  const auto forward = [&] { std::tie(out, indices) = at::adaptive_max_pool2d(x, {3, 3}); };
  const Measured card = MeasureWithKernels(kT4, forward);
  EXPECT_EQ(card.allocated, 576 + 1152 + 576 + 1152 + 2304);
  EXPECT_EQ(card.peak, card.allocated);
  EXPECT_EQ(card.live, 576 + 1152);
  EXPECT_TRUE(out.is_contiguous(kChannelsLast));
  EXPECT_EQ(MeasureWithKernels(kCpu, forward).allocated, 576 + 1152);

  const at::Tensor grad = at::empty_like(out);  // channels-last, as autograd's would be
  const auto backward = [&] { at::Tensor g = at::adaptive_max_pool2d_backward(grad, x, indices); };
  const Measured card_backward = MeasureWithKernels(kT4, backward);
  EXPECT_EQ(card_backward.allocated, 2304 + 576 + 1152 + 2304);
  EXPECT_EQ(card_backward.peak, card_backward.allocated);
  EXPECT_EQ(MeasureWithKernels(kCpu, backward).allocated, 2304);

  // NCHW: nothing beside the outputs on either.
  const at::Tensor nchw = at::empty({2, 8, 6, 6}, kMeta);
  EXPECT_EQ(MeasureWithKernels(kT4, [&] { auto r = at::adaptive_max_pool2d(nchw, {3, 3}); }).allocated, 576 + 1152);
}

// AdaptiveAveragePooling.cu's backward follows the input's format and reads a channels-last grad_output
// in place; cpu's follows grad_output's and copies the side that differs. Input [2, 8, 8, 8] float
// (grad_input 4096 bytes), grad_output [2, 8, 4, 4] (1024).
TEST_F(CardPool, AdaptiveAvgPool2dBackwardOnACardFollowsTheInputsFormat) {
  // A channels-last input, an NCHW grad_output (a flatten's backward gives one): cpu copies grad_input
  // to NCHW to compute into (4096 more); a card computes in channels-last.
  const at::Tensor x_cl = ChannelsLast({2, 8, 8, 8});
  const at::Tensor grad_nchw = at::empty({2, 8, 4, 4}, kMeta);
  const auto cl_backward = [&] { at::Tensor g = at::_adaptive_avg_pool2d_backward(grad_nchw, x_cl); };
  EXPECT_EQ(MeasureWithKernels(kT4, cl_backward).allocated, 4096);
  EXPECT_EQ(MeasureWithKernels(kCpu, cl_backward).allocated, 4096 + 4096);
  // An NCHW input, a channels-last grad_output: cpu copies grad_input to channels-last (4096); a card
  // makes grad_output contiguous (1024).
  const at::Tensor x = at::empty({2, 8, 8, 8}, kMeta);
  const at::Tensor grad_cl = ChannelsLast({2, 8, 4, 4});
  const auto nchw_backward = [&] { at::Tensor g = at::_adaptive_avg_pool2d_backward(grad_cl, x); };
  EXPECT_EQ(MeasureWithKernels(kT4, nchw_backward).allocated, 4096 + 1024);
  EXPECT_EQ(MeasureWithKernels(kCpu, nchw_backward).allocated, 4096 + 4096);
  // Forward: the output only (a channels-last input read in place on a card, already contiguous on cpu).
  EXPECT_EQ(MeasureWithKernels(kT4, [&] { at::Tensor o = at::adaptive_avg_pool2d(x_cl, {4, 4}); }).allocated, 1024);
}

// adaptive_avg_pool2d to 1x1 is mean((-1, -2)) on every device (AdaptiveAveragePooling.cpp). A bf16
// [2, 8, 4, 4] input: a card's mean_stub reduces into the [2, 8, 1, 1] result (32 bytes); cpu's mean
// adds a float32 result (64) and a float32 copy of the input (2 x 8 x 16 x 4 = 1024).
TEST_F(CardPool, GlobalAveragePoolOnACardMakesNoFloatCopies) {
  const at::Tensor x = at::empty({2, 8, 4, 4}, kMeta.dtype(at::kBFloat16));
  const auto pool = [&] { at::Tensor o = at::adaptive_avg_pool2d(x, {1, 1}); };
  const Measured card = MeasureWithKernels(kT4, pool);
  EXPECT_EQ(card.allocated, 32);
  const Measured cpu = MeasureWithKernels(kCpu, pool);
  EXPECT_EQ(cpu.allocated, 32 + 64 + 1024);
  EXPECT_EQ(cpu.peak, 32 + 64 + 1024);
}

// max_pool2d_with_indices, avg_pool2d and their backward (DilatedMaxPool2d.cu, AveragePool2d.cu) make
// what the structured Meta functions make, as cpu's kernels do, NCHW or channels-last: a [2, 8, 8, 8]
// float input pooled by 2 gives a 1024-byte output and 2048 bytes of int64 indices; grad_input 4096.
TEST_F(CardPool, MaxAndAveragePool2dAllocateAsOnCpu) {
  for (const at::Tensor& x : {at::empty({2, 8, 8, 8}, kMeta), ChannelsLast({2, 8, 8, 8})}) {
    for (const KernelTarget& target : {kT4, kCpu}) {
      at::Tensor out, indices;
      const auto max_pool = [&] { std::tie(out, indices) = at::max_pool2d_with_indices(x, {2}); };
      EXPECT_EQ(MeasureWithKernels(target, max_pool).allocated, 1024 + 2048);
      const at::Tensor grad = at::empty_like(out);
      const auto max_backward = [&] {
        at::Tensor g = at::max_pool2d_with_indices_backward(grad, x, {2}, {2}, {0}, {1}, false, indices);
      };
      EXPECT_EQ(MeasureWithKernels(target, max_backward).allocated, 4096);
      const auto avg_pool = [&] { at::Tensor o = at::avg_pool2d(x, {2}); };
      EXPECT_EQ(MeasureWithKernels(target, avg_pool).allocated, 1024);
      const auto avg_backward = [&] {
        at::Tensor g = at::avg_pool2d_backward(grad, x, {2}, {2}, {0}, false, true, std::nullopt);
      };
      EXPECT_EQ(MeasureWithKernels(target, avg_backward).allocated, 4096);
    }
  }
}

// Interpolating NCHW tensors a card allocates the output alone. cpu: a [1, 4, 8, 8] float input to 16x16
// (output 4096 bytes) takes its channels-last kernel (output height + width <= 128), with channels-last
// copies of the input (1024) and the output (4096); [1, 4, 64, 64] to 128x128 bilinear (output
// 262144) takes the generic one, with per dimension two int64 indices and two float weights
// [1, 1, 128, 1]: 2 x 2 x (1024 + 512) = 6144.
TEST_F(CardPool, InterpolationOnACardKeepsNoIndicesOrCopies) {
  const at::Tensor small = at::empty({1, 4, 8, 8}, kMeta);
  const auto nearest = [&] { at::Tensor o = at::upsample_nearest2d(small, {16, 16}); };
  EXPECT_EQ(MeasureWithKernels(kT4, nearest).allocated, 4096);
  EXPECT_EQ(MeasureWithKernels(kCpu, nearest).allocated, 4096 + 1024 + 4096);
  const at::Tensor large = at::empty({1, 4, 64, 64}, kMeta);
  const auto bilinear = [&] { at::Tensor o = at::upsample_bilinear2d(large, {128, 128}, false); };
  EXPECT_EQ(MeasureWithKernels(kT4, bilinear).allocated, 262144);
  EXPECT_EQ(MeasureWithKernels(kCpu, bilinear).allocated, 262144 + 6144);
}

// UpSampleNearest2d.cu takes its channels-last kernel from 4 channels; below, it computes into an NCHW
// buffer from an NCHW copy. A channels-last [1, 2, 8, 8] float input (512 bytes) to 16x16: the output
// (2048, channels-last), an NCHW one to compute into (2048) and the input's NCHW copy (512). Backward
// from a channels-last grad_output (2048): grad_input (512, channels-last), an NCHW one (512) and
// grad_output's NCHW copy (2048). cpu keeps both in channels-last, nothing beside.
TEST_F(CardPool, NearestOnACardCopiesFewChannelsLastChannelsToNchw) {
  const at::Tensor x = ChannelsLast({1, 2, 8, 8});
  at::Tensor out;
  const auto forward = [&] { out = at::upsample_nearest2d(x, {16, 16}); };
  const Measured card = MeasureWithKernels(kT4, forward);
  EXPECT_EQ(card.allocated, 2048 + 2048 + 512);
  EXPECT_EQ(card.live, 2048);
  EXPECT_TRUE(out.is_contiguous(kChannelsLast));
  EXPECT_EQ(MeasureWithKernels(kCpu, forward).allocated, 2048);
  const auto backward = [&] { at::Tensor g = at::upsample_nearest2d_backward(out, {16, 16}, {1, 2, 8, 8}); };
  EXPECT_EQ(MeasureWithKernels(kT4, backward).allocated, 512 + 512 + 2048);
  EXPECT_EQ(MeasureWithKernels(kCpu, backward).allocated, 512);
  // From 4 channels the channels-last kernel: nothing beside the output ([1, 4, 16, 16], 4096).
  const at::Tensor wide = ChannelsLast({1, 4, 8, 8});
  EXPECT_EQ(MeasureWithKernels(kT4, [&] { at::Tensor o = at::upsample_nearest2d(wide, {16, 16}); }).allocated, 4096);
}

}  // namespace
}  // namespace oomguard::testing
