// Note [Unmirrored ops are said as they run] (backends/meta/kernel_target.h): a recurrent op called by
// code with no graph to read (here a function measured in process, as a registered C++ workload or the
// Python package's loop runs) is said on meta, with cpu's words or a card's, once per op, and never on cpu.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "oomguard/measure.h"
#include "oomguard/workload.h"

namespace oomguard {
namespace {

// A 1-layer LSTM (or GRU) of 8 inputs and 16 hidden units over [2, 5, 8], trained one step.
void Recurrent(Context& ctx, bool gru) {
  const int64_t gates = (gru ? 3 : 4) * 16;
  const at::TensorOptions o = ctx.options();
  std::vector<at::Tensor> params = {at::zeros({gates, 8}, o).requires_grad_(), at::zeros({gates, 16}, o).requires_grad_(),
                                    at::zeros({gates}, o).requires_grad_(), at::zeros({gates}, o).requires_grad_()};
  const at::Tensor x = at::zeros({2, 5, 8}, o), h0 = at::zeros({1, 2, 16}, o);
  for ([[maybe_unused]] int64_t iteration : ctx.Iterations()) {
    const at::Tensor out = gru ? std::get<0>(at::gru(x, h0, params, true, 1, 0.0, true, false, true))
                               : std::get<0>(at::lstm(x, {h0, h0}, params, true, 1, 0.0, true, false, true));
    out.sum().backward();
  }
}

Measurement Measured(const std::string& backend, const std::string& kernels, bool gru) {
  MeasureOptions options;
  options.backend = backend;
  options.kernels = kernels;
  options.card = "t4";
  return Measure([gru](Context& ctx) { Recurrent(ctx, gru); }, options);
}

std::vector<std::string> Unmirrored(const Measurement& m) {
  std::vector<std::string> said;
  for (const std::string& w : m.warnings) {
    if (w.find("runs on meta through PyTorch's native per-step path") != std::string::npos) said.push_back(w);
  }
  return said;
}

TEST(UnmirroredOps, AnLstmOnMetaSaysItsBytesAreNotCpus) {
  const Measurement m = Measured("meta", "", /*gru=*/false);
  ASSERT_EQ(m.outcome, "pass") << m.error;
  EXPECT_EQ(Unmirrored(m), std::vector<std::string>{
                               "aten::lstm runs on meta through PyTorch's native per-step path, while cpu runs "
                               "oneDNN's LSTM (mkldnn_rnn_layer, with its workspace), which meta does not mirror yet: "
                               "its bytes on meta are not cpu's. Run it on cpu for exact bytes"});
}

TEST(UnmirroredOps, AGruInCardModeSaysItsBytesAreNotTheCards) {
  const Measurement m = Measured("meta", "cuda", /*gru=*/true);
  ASSERT_EQ(m.outcome, "pass") << m.error;
  EXPECT_EQ(Unmirrored(m), std::vector<std::string>{
                               "aten::gru runs on meta through PyTorch's native per-step path, while a card runs "
                               "cuDNN's RNN (_cudnn_rnn: its weights copied into one flat buffer, and in training a "
                               "reserve space kept for the backward, sized by cuDNN on the card), which card mode does "
                               "not model: its bytes on meta are not the card's"});
}

TEST(UnmirroredOps, CpuRunsItsOwnKernelsAndSaysNothing) {
  const Measurement m = Measured("cpu", "", /*gru=*/false);
  ASSERT_EQ(m.outcome, "pass") << m.error;
  EXPECT_TRUE(Unmirrored(m).empty());
}

TEST(UnmirroredOps, AMetaRunWithoutARecurrentOpSaysNothing) {
  MeasureOptions options;
  options.backend = "meta";
  const Measurement m = Measure(
      [](Context& ctx) {
        for ([[maybe_unused]] int64_t iteration : ctx.Iterations()) (void)at::zeros({4, 4}, ctx.options()).sum();
      },
      options);
  ASSERT_EQ(m.outcome, "pass") << m.error;
  EXPECT_TRUE(Unmirrored(m).empty());
}

}  // namespace
}  // namespace oomguard
