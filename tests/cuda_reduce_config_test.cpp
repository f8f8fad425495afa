// setReduceConfig ported (backends/meta/cuda_reduce_config.h): each expectation is Reduce.cuh's
// arithmetic done by hand in the comment above it, on a T4 (40 SMs, 1024 threads an SM) and an A100
// (108 SMs, 2048 threads an SM).
#include "backends/meta/cuda_reduce_config.h"

#include <gtest/gtest.h>

namespace oomguard {
namespace {

const CudaDeviceProps kT4 = ReferenceDeviceProps(75);
const CudaDeviceProps kA100 = ReferenceDeviceProps(80);
const ReduceKernel kFloatSum{/*arg_size=*/4, /*scalar_size=*/4, /*vt0=*/4, /*input_vec_size=*/4, 512};

TEST(CudaReduceConfigTest, ReferenceCardsCarryTheirSmCounts) {
  EXPECT_EQ(kT4.sm_count, 40);
  EXPECT_EQ(kT4.max_threads_per_sm, 1024);
  EXPECT_EQ(kA100.sm_count, 108);
  EXPECT_EQ(kA100.max_threads_per_sm, 2048);
  EXPECT_EQ(ReferenceDeviceProps(90).sm_count, 132);
}

// TensorIterator puts the reduced dimension first and does not coalesce it with the kept one (the
// output's strides 0 and 4 do not chain).
TEST(CudaReduceConfigTest, ALayoutPutsReducedDimensionsFirst) {
  const ReduceLayout l = ReduceLayoutOf({65536, 64}, {64, 1}, 0, {true, false}, false, 4, 4);
  EXPECT_EQ(l.shape, (std::vector<int64_t>{65536, 64}));
  EXPECT_EQ(l.output_strides, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(l.input_strides, (std::vector<int64_t>{256, 4}));
  EXPECT_EQ(l.num_reduce_dims(), 1);
  EXPECT_EQ(l.num_output_elements(), 64);
  // Reducing the last two of [8, 16, 32]: they coalesce into one reduced dimension of 512.
  const ReduceLayout m = ReduceLayoutOf({8, 16, 32}, {512, 32, 1}, 0, {false, true, true}, true, 4, 4);
  EXPECT_EQ(m.shape, (std::vector<int64_t>{512, 8}));
  EXPECT_EQ(m.input_strides, (std::vector<int64_t>{4, 2048}));
}

// x.sum() over 1,048,576 floats: one output, reduction on the fastest dimension, vectorised along the
// input (dim0 = 1048576 / 4); block 512 x 1 (block_width 32, then 512 / 1); step_input 512, so 2048
// values a thread, past the warp split threshold min(1 x 16, 256): split across warps (block_height 1).
// Blocks per SM: 1024 / 512 = 2 on a T4, target grid 80; grid 1; ctas = max(min(80, 2048 / 16 = 128),
// 2048 / 256 = 8) = 80; block-x reduced, so the staging buffer is 4 x 1 x 80 = 320 bytes, and the
// semaphores 4 x grid 1. An A100: 2048 / 512 = 4 blocks an SM, target 432, ctas min(432, 128) = 128:
// 512 bytes.
TEST(CudaReduceConfigTest, AFullSumSplitsAcrossBlocksBySmCount) {
  const ReduceLayout l = ReduceLayoutOf({1048576}, {1}, 0, {true}, false, 4, 4);
  const ReduceConfig t4 = SetReduceConfig(l, kFloatSum, kT4);
  EXPECT_TRUE(t4.vectorize_input);
  EXPECT_EQ(t4.block_width, 512);
  EXPECT_EQ(t4.block_height, 1);
  EXPECT_TRUE(t4.should_global_reduce());
  EXPECT_EQ(t4.ctas_per_output, 80);
  EXPECT_EQ(t4.global_memory_size(), 320);
  EXPECT_EQ(t4.semaphore_size(), 4);
  const ReduceConfig a100 = SetReduceConfig(l, kFloatSum, kA100);
  EXPECT_EQ(a100.ctas_per_output, 128);
  EXPECT_EQ(a100.global_memory_size(), 512);
}

// grad.sum(0) over [65536, 64] floats (a bias gradient): reduction off the fastest dimension, outputs
// vectorised by 4 (64 and the row stride 64 divide by 4), dim0 = 64 / 4 = 16, max threads 512 / 4 = 128:
// block 16 x 8. step_output 16; 65536 values a thread >= min(8 x 16, 256): split across warps,
// step_input 8, 8192 values a thread. T4: 1024 / 128 = 8 blocks an SM, target 320, grid ceil(16 / 16) =
// 1: ctas = max(min(320, 8192 / 16 = 512), 32) = 320. Not block-x reduced, so the staging buffer is
// 4 x 64 outputs x 320 ctas x (block_width 16 x vec 4) = 5,242,880 bytes. A100: 16 blocks an SM, target
// 1728, ctas min(1728, 512) = 512: 4 x 64 x 512 x 64 = 8,388,608.
TEST(CudaReduceConfigTest, ABiasGradientStagesEveryBlocksPartialOutputs) {
  const ReduceLayout l = ReduceLayoutOf({65536, 64}, {64, 1}, 0, {true, false}, false, 4, 4);
  const ReduceConfig t4 = SetReduceConfig(l, kFloatSum, kT4);
  EXPECT_EQ(t4.output_vec_size, 4);
  EXPECT_EQ(t4.block_width, 16);
  EXPECT_EQ(t4.block_height, 8);
  EXPECT_FALSE(t4.should_block_x_reduce());
  EXPECT_EQ(t4.ctas_per_output, 320);
  EXPECT_EQ(t4.global_memory_size(), 5'242'880);
  EXPECT_EQ(t4.semaphore_size(), 4);
  EXPECT_EQ(SetReduceConfig(l, kFloatSum, kA100).global_memory_size(), 8'388'608);
  // A storage offset of 2 floats leaves the input 8-byte aligned only: vec 2, block 32 x 8 (max threads
  // 256), step_output 32, ctas on a T4 (4 blocks an SM, target 160): min(160, 512) = 160, and the buffer
  // 4 x 64 x 160 x (32 x 2) = 2,621,440.
  const ReduceLayout offset = ReduceLayoutOf({65536, 64}, {64, 1}, 2, {true, false}, false, 4, 4);
  const ReduceConfig t4_offset = SetReduceConfig(offset, kFloatSum, kT4);
  EXPECT_EQ(t4_offset.output_vec_size, 2);
  EXPECT_EQ(t4_offset.global_memory_size(), 2'621'440);
}

// x.mean(1) over [4, 256] bf16 (float accumulator, 8 inputs a load): dim0 = 256 / 8 = 32, block 32 x 4;
// 256 / 32 = 8 values a thread, under min(4 x 16, 256): each warp its own output, no block split, on
// any card. The same for x.sum(1) over [64, 1024] floats: dim0 1024 / 4 = 256, block 32 x 16, 32 values
// a thread under 256.
TEST(CudaReduceConfigTest, ShortRowsNeedNoGlobalScratch) {
  const ReduceKernel bf16{4, 2, 4, 8, 512};
  const ReduceLayout rows = ReduceLayoutOf({4, 256}, {256, 1}, 0, {false, true}, false, 2, 2);
  EXPECT_FALSE(SetReduceConfig(rows, bf16, kT4).should_global_reduce());
  EXPECT_EQ(SetReduceConfig(rows, bf16, kT4).global_memory_size(), 0);
  const ReduceLayout wide = ReduceLayoutOf({64, 1024}, {1024, 1}, 0, {false, true}, false, 4, 4);
  const ReduceConfig c = SetReduceConfig(wide, kFloatSum, kA100);
  EXPECT_EQ(c.block_width, 32);
  EXPECT_EQ(c.block_height, 16);
  EXPECT_FALSE(c.should_global_reduce());
}

// The accumulator scales the staging buffer and nothing else (setReduceConfig reads sizeof(arg_t) only
// into element_size_bytes, line 1040); input_vec_size divides dim0 only while it vectorises along the
// input (line 1104), where the block is 512 wide for any of 2, 4 or 8 once dim0 passes 512, and a
// narrower block leaves under 2 x input_vec_size <= 16 values a thread, below every warp split
// threshold: it never changes the split. vt0 is not read at all. So var's Welford kernel (WelfordData
// <float, int32_t>: 16 bytes, vt0 2, input_vec_size 2) over 1,048,576 floats splits as the float sum
// above (ctas 80 on a T4, 128 on an A100) and stages 16 x 80 = 1,280 and 16 x 128 = 2,048 bytes; over
// the rows of [65536, 64], 16 x 64 x 320 x 64 = 20,971,520 on a T4.
TEST(CudaReduceConfigTest, TheAccumulatorScalesTheBufferAlone) {
  const ReduceKernel welford{16, 4, 2, 2, 512};
  const ReduceLayout full = ReduceLayoutOf({1048576}, {1}, 0, {true}, false, 4, 4);
  const ReduceConfig t4 = SetReduceConfig(full, welford, kT4);
  EXPECT_TRUE(t4.vectorize_input);
  EXPECT_EQ(t4.block_width, 512);
  EXPECT_EQ(t4.ctas_per_output, 80);
  EXPECT_EQ(t4.global_memory_size(), 1280);
  EXPECT_EQ(SetReduceConfig(full, welford, kA100).global_memory_size(), 2048);
  const ReduceLayout rows = ReduceLayoutOf({65536, 64}, {64, 1}, 0, {true, false}, false, 4, 4);
  EXPECT_EQ(SetReduceConfig(rows, welford, kT4).global_memory_size(), 20'971'520);
  for (int vec : {2, 4, 8}) {
    for (int64_t n : {128, 1000, 4096, 65536, 1048576}) {
      const ReduceLayout l = ReduceLayoutOf({n}, {1}, 0, {true}, false, 4, 4);
      EXPECT_EQ(SetReduceConfig(l, ReduceKernel{4, 4, 4, vec, 512}, kT4).global_memory_size(),
                SetReduceConfig(l, kFloatSum, kT4).global_memory_size())
          << n << " values, input_vec_size " << vec;
    }
  }
}

}  // namespace
}  // namespace oomguard
