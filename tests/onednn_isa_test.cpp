// Note [One oneDNN ISA on every machine] (allocators/install.h): the test binary, like the CLI, caps
// oneDNN at AVX2 before anything runs, so the kernels cpu picks, and the bytes they allocate, are
// those of an AVX2 machine even on one with AVX-512 or AMX.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "allocators/install.h"
#include "backends/onednn_query.h"

namespace oomguard {
namespace {

TEST(OneDnnIsa, IsCappedAtAvx2BeforeAnythingRuns) { EXPECT_EQ(OneDnnIsaCap(), "AVX2"); }

// The implementation oneDNN picks for a convolution names its ISA ("brg_conv_fwd:avx2", "jit:avx2").
TEST(OneDnnIsa, AConvolutionPicksNoAvx512OrAmxImplementation) {
  std::string why_not;
  if (!onednn::Available(&why_not)) GTEST_SKIP() << why_not;
  using onednn::MemoryDesc;
  const onednn::Primitive pd = onednn::Primitive::ConvForward(
      MemoryDesc::Any({8, 32, 16, 16}, at::kFloat), MemoryDesc::Any({64, 32, 3, 3}, at::kFloat), MemoryDesc(),
      MemoryDesc::Any({8, 64, 16, 16}, at::kFloat), {1, 1}, {0, 0}, {1, 1}, {1, 1});
  const std::string implementation = pd.implementation();
  EXPECT_EQ(implementation.find("avx512"), std::string::npos) << implementation;
  EXPECT_EQ(implementation.find("amx"), std::string::npos) << implementation;
}

// A bf16 linear takes ATen's own gemm, as on an AVX2 machine: its output and nothing else. Through
// oneDNN (an AVX-512 machine uncapped) it would allocate reordered weights too.
TEST(OneDnnIsa, ABf16LinearAllocatesOnlyItsOutput) {
  const at::Tensor x = at::ones({64, 512}, at::kBFloat16), w = at::ones({512, 512}, at::kBFloat16);
  Ledger& ledger = CpuAccount().ledger();
  ledger.ResetStatistics();  // counters from zero
  const at::Tensor y = at::linear(x, w);
  const LedgerStats stats = ledger.Snapshot();
  EXPECT_EQ(stats.alloc_count, 1);
  EXPECT_EQ(stats.allocated_bytes_total, 64 * 512 * 2);
}

}  // namespace
}  // namespace oomguard
