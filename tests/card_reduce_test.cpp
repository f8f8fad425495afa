// A card's reductions and what depends on its SM count (Note [A card's SM count in card mode],
// backends/meta/kernel_target.h): Reduce.cuh's global scratch (the arithmetic is derived in
// tests/cuda_reduce_config_test.cpp; here the bytes reach the meta ledger, freed when the op returns),
// and layer norm backward's partial sums past 65,536 rows.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "allocators/install.h"
#include "backends/meta/kernel_target.h"
#include "tests/card_mode_harness.h"

namespace oomguard {
namespace {

using testing::kMeta;
using testing::MeasureOnMeta;

const KernelTarget kT4 = KernelTarget::Cuda(75);    // 40 SMs, 1024 threads an SM
const KernelTarget kA100 = KernelTarget::Cuda(80);  // 108 SMs, 2048 threads an SM

class CardReduceTest : public testing::CardModeTest {};

template <class F>
testing::Measured OnCard(const KernelTarget& target, F&& f) {
  ScopedKernelTarget scope(target);
  return MeasureOnMeta(std::forward<F>(f));
}

// A bias gradient, grad.sum(0) over [65536, 64] floats: the result (256 bytes), and while the kernel
// runs the staging buffer (5,242,880 bytes on a T4, 8,388,608 on an A100) and 4 bytes of semaphores.
TEST_F(CardReduceTest, SumOverRowsHoldsItsStagingBufferWhileItRuns) {
  const at::Tensor grad = at::empty({65536, 64}, kMeta);
  const auto sum = [&] { at::Tensor bias = grad.sum(0); };
  const testing::Measured t4 = OnCard(kT4, sum);
  EXPECT_EQ(t4.peak, 256 + 5'242'880 + 4);
  EXPECT_EQ(t4.live, 0);
  EXPECT_EQ(OnCard(kA100, sum).peak, 256 + 8'388'608 + 4);
  // cpu's kernels, mirrored: the result alone.
  EXPECT_EQ(OnCard(KernelTarget::Cpu(), sum).peak, 256);
}

// x.mean() over 1,048,576 floats: the 0-dim result, a 320-byte staging buffer (80 blocks) on a T4, 512
// (128 blocks) on an A100, and 4 bytes of semaphores.
TEST_F(CardReduceTest, AFullMeanSplitsByTheCardsSms) {
  const at::Tensor x = at::empty({1048576}, kMeta);
  const auto mean = [&] { at::Tensor m = x.mean(); };
  EXPECT_EQ(OnCard(kT4, mean).peak, 4 + 320 + 4);
  EXPECT_EQ(OnCard(kA100, mean).peak, 4 + 512 + 4);
}

// mse_loss's mean on a card (meta_kernels_loss.cpp): the result (the elementwise loss's storage, 4 MiB,
// Note [mse_loss's reduction on cpu]), the unreduced loss (4 MiB), then mean_out's scratch over its
// 1,048,576 floats, as x.mean()'s above: 320 + 4 bytes on a T4.
TEST_F(CardReduceTest, MseLossMeanHoldsTheReductionsScratch) {
  const at::Tensor x = at::empty({1048576}, kMeta);
  EXPECT_EQ(OnCard(kT4, [&] { at::Tensor l = at::mse_loss(x, x); }).peak, 2 * 4'194'304 + 320 + 4);
}

// x.sum(1) over [64, 1024] floats: 32 values a thread, each warp its own output: no scratch on any card.
TEST_F(CardReduceTest, ShortRowsReduceWithoutScratch) {
  const at::Tensor x = at::empty({64, 1024}, kMeta);
  const auto sum = [&] { at::Tensor s = x.sum(1); };
  EXPECT_EQ(OnCard(kT4, sum).peak, 64 * 4);
  EXPECT_EQ(OnCard(kA100, sum).peak, 64 * 4);
}

// A bool mask summed: int64 result, and make_reduction's int64 copy of the input (self.to(kLong)),
// alive while the kernel runs. 1000 int64 values vectorised by 4: dim0 250, block 128 x 1, 8 values a
// thread, under min(1 x 16, 256): no split. Peak 8 + 8,000.
TEST_F(CardReduceTest, ABoolSumCastsItsInputFirst) {
  const at::Tensor mask = at::empty({1000}, kMeta.dtype(at::kBool));
  EXPECT_EQ(OnCard(kT4, [&] { at::Tensor n = mask.sum(); }).peak, 8 + 1000 * 8);
}

// layer_norm_kernel.cu LaunchGammaBetaBackwardCUDAKernel: 131,072 rows of N = 1024 in bf16. A T4 (40
// SMs): N / 32 = 32 is not under 40 / 2, so no partial sums: dX and dgamma, dbeta (2,048 bytes each).
// An A100 (108 SMs): 32 < 54, blocks.x = 1024 / 32 = 32, blocks.y = min(32768 / 32, 131072 / 32) = 1024:
// partial sums [1024, 1024] bf16 for dgamma and dbeta (2,097,152 bytes each), each summed with .sum(0):
// a new [1024] result (2,048), and Reduce.cuh's scratch for [1024, 1024] bf16 over dim 0 (float
// accumulator, outputs vectorised by 4: block 32 x 4, step_output 32, step_input 4, 256 values a thread;
// 16 blocks an SM, target 1728, grid ceil(256 / 32) = 8, ctas max(min(216, 16), 1) = 16; staging
// 4 x 1024 x 16 x (32 x 4) = 8,388,608, semaphores 4 x 8 = 32). The first sum's moment is the peak:
// dX 268,435,456 + dgamma and dbeta 4,096 + partial sums 4,194,304 + new dgamma 2,048 + scratch
// 8,388,640 = 281,024,544. The old dgamma and dbeta are freed as the sums replace them.
TEST_F(CardReduceTest, LayerNormBackwardSumsPartialSumsPastSixtyFiveThousandRows) {
  const at::TensorOptions bf16 = kMeta.dtype(at::kBFloat16);
  const at::Tensor x = at::empty({131072, 1024}, bf16);
  const at::Tensor dy = at::empty({131072, 1024}, bf16);
  const at::Tensor w = at::empty({1024}, bf16);
  const at::Tensor b = at::empty({1024}, bf16);
  const auto backward = [&](const KernelTarget& target) {
    ScopedKernelTarget scope(target);
    auto [y, mean, rstd] = at::native_layer_norm(x, {1024}, w, b, 1e-5);
    return MeasureOnMeta([&] {
      auto [dx, dw, db] = at::native_layer_norm_backward(dy, x, {1024}, mean, rstd, w, b, {true, true, true});
    });
  };
  const int64_t dx = int64_t{131072} * 1024 * 2;
  EXPECT_EQ(backward(kT4).peak, dx + 2 * 2048);
  EXPECT_EQ(backward(kA100).peak, dx + 2 * 2048 + 2 * 2'097'152 + 2048 + 8'388'608 + 32);
  // At 65,536 rows (not past them) no card splits the rows.
  const at::Tensor x64 = at::empty({65536, 64}, bf16);
  const at::Tensor w64 = at::empty({64}, bf16);
  ScopedKernelTarget scope(kA100);
  auto [y, mean, rstd] = at::native_layer_norm(x64, {64}, w64, w64, 1e-5);
  EXPECT_EQ(
      MeasureOnMeta([&] {
        auto [dx64, dw, db] = at::native_layer_norm_backward(x64, x64, {64}, mean, rstd, w64, w64, {true, true, true});
      }).peak,
      65536 * 64 * 2 + 2 * 64 * 2);
}

}  // namespace
}  // namespace oomguard
