// Note [Unmirrored ops are said at run time] (workload/unmirrored_op_watch.h): a recurrent op called by
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

TEST(UnmirroredOpWatch, AnLstmOnMetaSaysItsBytesAreNotCpus) {
  const Measurement m = Measured("meta", "", /*gru=*/false);
  ASSERT_EQ(m.outcome, "pass") << m.error;
  EXPECT_EQ(Unmirrored(m), std::vector<std::string>{
                               "aten::lstm runs on meta through PyTorch's native per-step path, while cpu runs "
                               "oneDNN's LSTM (mkldnn_rnn_layer, with its workspace), which meta does not mirror yet: "
                               "its bytes on meta are not cpu's. Run it on cpu for exact bytes"});
}

TEST(UnmirroredOpWatch, AGruInCardModeSaysItsBytesAreNotTheCards) {
  const Measurement m = Measured("meta", "cuda", /*gru=*/true);
  ASSERT_EQ(m.outcome, "pass") << m.error;
  EXPECT_EQ(Unmirrored(m), std::vector<std::string>{
                               "aten::gru runs on meta through PyTorch's native per-step path, while a card runs "
                               "cuDNN's RNN (_cudnn_rnn: its weights copied into one flat buffer, and in training a "
                               "reserve space kept for the backward, sized by cuDNN on the card), which card mode does "
                               "not model: its bytes on meta are not the card's"});
}

TEST(UnmirroredOpWatch, CpuRunsItsOwnKernelsAndSaysNothing) {
  const Measurement m = Measured("cpu", "", /*gru=*/false);
  ASSERT_EQ(m.outcome, "pass") << m.error;
  EXPECT_TRUE(Unmirrored(m).empty());
}

// Python's clip_grad_norm_ takes _foreach_norm wherever foreach is supported: on a card it is ForeachReduceOp.cu's
// kernel, whose buffers card mode does not model; on cpu's kernels meta runs cpu's per-tensor path, as cpu does.
std::vector<std::string> ForeachNormWarnings(const std::string& kernels) {
  MeasureOptions options;
  options.backend = "meta";
  options.kernels = kernels;
  options.card = "t4";
  const Measurement m = Measure(
      [](Context& ctx) {
        const std::vector<at::Tensor> grads = {at::zeros({512, 512}, ctx.options()), at::zeros({512}, ctx.options())};
        for ([[maybe_unused]] int64_t iteration : ctx.Iterations()) (void)at::_foreach_norm(grads, 2);
      },
      options);
  EXPECT_EQ(m.outcome, "pass") << m.error;
  std::vector<std::string> said;
  for (const std::string& w : m.warnings) {
    if (w.starts_with("aten::_foreach_norm")) said.push_back(w);
  }
  return said;
}

TEST(UnmirroredOpWatch, ForeachNormIsSaidOnACardOnly) {
  EXPECT_EQ(ForeachNormWarnings("cuda"),
            std::vector<std::string>{
                "aten::_foreach_norm runs on meta as one norm per tensor, while a card runs ForeachReduceOp.cu's "
                "multi-tensor kernel (a float buffer of partial norms for every 65,536-element chunk of every tensor, "
                "and the results in one tensor), which card mode does not model: its bytes on meta are not the "
                "card's"});
  EXPECT_TRUE(ForeachNormWarnings("").empty());
}

TEST(UnmirroredOpWatch, AMetaRunWithoutARecurrentOpSaysNothing) {
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
