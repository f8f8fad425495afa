// Note [One oneDNN ISA on every machine] (allocators/install.h): the test binary, like the CLI, caps
// oneDNN at AVX2 before anything runs, so the kernels cpu picks, and the bytes they allocate, are
// those of an AVX2 machine even on one with AVX-512 or AMX.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "allocators/install.h"
#include "backends/meta/onednn_query.h"
#include "nn/autocast/autocast.h"
#include "workload/error_category.h"

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

// An LSTM under bf16 autocast: PyTorch sends it to oneDNN's RNN (its float32 input qualifies, then
// autocast lowers mkldnn_rnn_layer to bf16), which has no bf16 kernel below AVX-512, as on an AVX2
// cpu. The error says that the cap is why, and how to lift it; the same LSTM in float32 runs.
TEST(OneDnnIsa, AnOpWithNoKernelUnderTheCapSaysTheCapIsWhy) {
  const at::Tensor input = at::ones({2, 3, 8});  // [seq, batch, features]
  const at::Tensor hx = at::zeros({1, 3, 4}), cx = at::zeros({1, 3, 4});
  const std::vector<at::Tensor> weights = {at::ones({16, 8}), at::ones({16, 4}), at::zeros({16}), at::zeros({16})};
  auto lstm = [&] {
    return std::get<0>(at::lstm(input, {hx, cx}, weights, /*has_biases=*/true, /*num_layers=*/1, /*dropout=*/0.0,
                                /*train=*/true, /*bidirectional=*/false, /*batch_first=*/false));
  };
  EXPECT_EQ(lstm().sizes(), (std::vector<int64_t>{2, 3, 4}));
  AutocastScope autocast({c10::kCPU, at::kBFloat16});
  try {
    lstm();
    ADD_FAILURE() << "a bf16 LSTM ran under the AVX2 cap: PyTorch no longer sends it to oneDNN, drop this hint";
  } catch (const std::exception& e) {  // oneDNN's own error type, not a c10::Error
    const std::string message = DescribeError(e, "");
    EXPECT_TRUE(message.starts_with("could not create a primitive descriptor")) << message;
    EXPECT_NE(message.find("oomguard caps oneDNN at AVX2"), std::string::npos) << message;
    EXPECT_NE(message.find("ONEDNN_MAX_CPU_ISA=ALL lifts the cap"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace oomguard
