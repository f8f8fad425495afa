// One variant measured in-process: the byte arithmetic of a tiny model, known by hand.
//
// Model: linear(4 -> 8) -> relu -> linear(8 -> 2), batch 3, float32, loss = mean of the output.
//   parameters: (8*4 + 8 + 2*8 + 2) floats = 58 * 4 = 232 bytes; the batch: 3*4 floats = 48 bytes.
//   forward leaves live: relu's output (3*8*4 = 96, saved by relu and by the second linear), the output
//   (3*2*4 = 24) and the loss (4); the first linear's output (96) is saved by nobody and freed.
#include "workload/workload.h"

#include <gtest/gtest.h>

namespace oomguard {
namespace {

VariantSpec TinyModel() {
  VariantSpec v;
  v.name = "tiny";
  LayerSpec l1;
  l1.kind = "linear";
  l1.in = 4;
  l1.out = 8;
  LayerSpec relu;
  relu.kind = "relu";
  LayerSpec l2;
  l2.kind = "linear";
  l2.in = 8;
  l2.out = 2;
  v.model.layers = {l1, relu, l2};
  v.data.batch = 3;
  v.data.shape = {4};
  v.data.on_host = false;
  v.loop.iterations = 2;
  v.loop.loss = "mean";
  v.loop.optimizer.kind = "sgd";
  return v;
}

int64_t PeakOf(const VariantMeasurement& m, const std::string& phase) {
  for (const PhasePeak& p : m.ledger.phase_peaks) {
    if (p.phase == phase) return p.peak_bytes;
  }
  return -1;
}

TEST(Workload, TinyModelBytesAreKnownExactly) {
  const VariantMeasurement m = MeasureVariant(TinyModel(), VariantMeasureOptions{});
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  EXPECT_EQ(m.param_bytes, 232);
  EXPECT_EQ(m.grad_bytes, 232);
  EXPECT_EQ(m.optimizer_state_bytes, 0);  // plain SGD keeps no state
  EXPECT_EQ(m.forward_saved_bytes, 96 + 24 + 4);
  ASSERT_EQ(m.iterations.size(), 2u);
  // After an iteration: parameters and gradients (zero_grad sets them to none only at the next start).
  EXPECT_EQ(m.iterations[0].live_after_bytes, 232 + 232);
  EXPECT_EQ(m.iterations[1].live_after_bytes, 232 + 232);
  EXPECT_EQ(PeakOf(m, "setup"), 232);
  EXPECT_EQ(m.transfers, 0);  // the batch is created on the device
  EXPECT_EQ(m.grad_digest.size(), 16u);
}

TEST(Workload, MomentumAndAdamStateAreMeasuredFromTheLedger) {
  VariantSpec v = TinyModel();
  v.loop.optimizer.momentum = 0.9;
  EXPECT_EQ(MeasureVariant(v, VariantMeasureOptions{}).optimizer_state_bytes, 232);  // one buffer per parameter
  v.loop.optimizer.kind = "adam";
  EXPECT_EQ(MeasureVariant(v, VariantMeasureOptions{}).optimizer_state_bytes, 2 * 232);  // exp_avg, exp_avg_sq
}

TEST(Workload, RetainGradKeepsAGradientPerKeptIntermediate) {
  VariantSpec fixed = TinyModel();
  fixed.pitfalls.keep_intermediates = true;
  VariantSpec pitfall = fixed;
  pitfall.pitfalls.retain_grad = true;
  const VariantMeasurement f = MeasureVariant(fixed, VariantMeasureOptions{});
  const VariantMeasurement p = MeasureVariant(pitfall, VariantMeasureOptions{});
  EXPECT_EQ(f.retained_grad_bytes, 0);
  EXPECT_EQ(p.retained_grad_bytes, 96 + 96);  // the first linear's and relu's outputs
  EXPECT_EQ(p.iterations[0].live_after_backward_bytes - f.iterations[0].live_after_backward_bytes, 192);
}

TEST(Workload, HostBatchesAreCountedAsTransfersAndNotAsDeviceMemory) {
  VariantSpec v = TinyModel();
  v.data.on_host = true;
  const VariantMeasurement m = MeasureVariant(v, VariantMeasureOptions{});
  EXPECT_EQ(m.transfers, 2);  // one batch per iteration
  EXPECT_EQ(m.transfer_bytes, 2 * 48);
  EXPECT_EQ(PeakOf(m, "transfer"), 232 + 48);  // parameters + the device copy; the host batch is not charged
}

TEST(Workload, AnOomAtTheCapReportsWhatWasLiveByCategory) {
  VariantMeasureOptions options;
  options.limits = LimitsForCap(232 + 48 + 96 + 50);  // room for the first linear's output, not relu's
  const VariantMeasurement m = MeasureVariant(TinyModel(), options);
  ASSERT_EQ(Name(m.outcome), "oom");
  ASSERT_TRUE(m.oom.has_value());
  const OomDetail& o = *m.oom;
  EXPECT_EQ(o.phase, "forward");
  EXPECT_EQ(o.requested_bytes, 96);
  EXPECT_EQ(o.live_bytes, 232 + 48 + 96);
  EXPECT_FALSE(o.injected);
  EXPECT_EQ(o.live.parameters_bytes, 232);
  EXPECT_EQ(o.live.gradients_bytes, 0);
  EXPECT_EQ(o.live.inputs_bytes, 48);
  EXPECT_EQ(o.live.activations_and_transient_bytes, 96);
  ASSERT_EQ(o.live.layers.size(), 1u);
  EXPECT_EQ(o.live.layers[0], (std::pair<std::string, int64_t>{"0:linear", 96}));
  EXPECT_EQ(m.error.rfind("CPU out of memory (oomguard cap). Tried to allocate 96 bytes.", 0), 0u) << m.error;
}

TEST(Workload, AnOomWhileTheModelIsBuiltCountsWhatIsLiveAsParameters) {
  VariantMeasureOptions options;
  options.limits = LimitsForCap(8 * 4 * 4 + 8 * 4 + 10);  // the first linear, not the second's weight
  const VariantMeasurement m = MeasureVariant(TinyModel(), options);
  ASSERT_EQ(Name(m.outcome), "oom");
  ASSERT_TRUE(m.oom.has_value());
  const OomDetail& o = *m.oom;
  EXPECT_EQ(o.phase, "setup");
  EXPECT_EQ(o.requested_bytes, 2 * 8 * 4);
  EXPECT_EQ(o.live_bytes, 8 * 4 * 4 + 8 * 4);
  EXPECT_EQ(o.live.parameters_bytes, 8 * 4 * 4 + 8 * 4);  // the model so far, not activations
  EXPECT_EQ(o.live.activations_and_transient_bytes, 0);
}

TEST(Workload, AnInjectedFaultInBackwardIsAnOomOfThatPhase) {
  VariantMeasureOptions options;
  std::string error;
  options.limits.faults = std::make_shared<FaultInjector>(ParseFaultSpec("phase=backward,nth=1", &error));
  const VariantMeasurement m = MeasureVariant(TinyModel(), options);
  ASSERT_EQ(Name(m.outcome), "oom");
  ASSERT_EQ(m.injected.size(), 1u);
  EXPECT_EQ(m.injected[0].phase, "backward");
  ASSERT_TRUE(m.oom.has_value());
  EXPECT_TRUE(m.oom->injected);
  EXPECT_EQ(m.oom->phase, "backward");
}

TEST(Workload, InplaceEditsFailWithTheirCategories) {
  VariantSpec v = TinyModel();
  v.model.layers[1].kind = "sigmoid";
  v.pitfalls.inplace.target = "output";
  v.pitfalls.inplace.layer = 1;
  v.pitfalls.inplace.op = "mul_";
  EXPECT_EQ(Name(MeasureVariant(v, VariantMeasureOptions{}).outcome), "error:inplace-saved-tensor");
  v.pitfalls.inplace.target = "parameter";
  v.pitfalls.inplace.layer = 0;
  EXPECT_EQ(Name(MeasureVariant(v, VariantMeasureOptions{}).outcome), "error:inplace-leaf");
}

// linear(8 -> 8) -> silu, batch 4, float32, loss = mean. silu saves its input for backward
// (SiluBackward0's _saved_self, as torch 2.11 shows; silu_backward takes grad_output and self), relu its
// output. Parameters: (8*8 + 8) * 4 = 288 bytes; every activation is 4*8*4 = 128 bytes.
//   silu: the linear's output (128, saved by silu), silu's output (128, the model's output), the loss (4);
//   relu: the linear's output is saved by nobody and freed; relu's output (128, saved by relu and the
//   model's output) and the loss (4).
TEST(Workload, SiluSavesItsInputAndReluItsOutput) {
  VariantSpec v = TinyModel();
  v.model.layers = {v.model.layers[0], v.model.layers[1]};
  v.model.layers[0].in = v.model.layers[0].out = 8;
  v.model.layers[1].kind = "silu";
  v.data.batch = 4;
  v.data.shape = {8};
  const VariantMeasurement silu = MeasureVariant(v, VariantMeasureOptions{});
  ASSERT_EQ(Name(silu.outcome), "pass") << silu.error;
  EXPECT_EQ(silu.param_bytes, 288);
  EXPECT_EQ(silu.grad_bytes, 288);
  EXPECT_EQ(silu.forward_saved_bytes, 128 + 128 + 4);
  v.model.layers[1].kind = "relu";
  const VariantMeasurement relu = MeasureVariant(v, VariantMeasureOptions{});
  ASSERT_EQ(Name(relu.outcome), "pass") << relu.error;
  EXPECT_EQ(relu.forward_saved_bytes, 128 + 4);
}

// --model-cuda: every allocation of the tiny model also reaches a CachingAllocatorModel. All its
// tensors are under 1 MiB, so they share one 2 MiB small-pool segment in 512-byte multiples.
void ExpectTinyModelPrediction(Backend backend) {
  VariantMeasureOptions options;
  options.backend = backend;
  options.model_cuda = ModelCuda::kPredict;
  const VariantMeasurement m = MeasureVariant(TinyModel(), options);
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  ASSERT_TRUE(m.cuda_model.has_value());
  const CudaModelMeasurement& c = *m.cuda_model;
  EXPECT_EQ(c.requested_peak_bytes, m.ledger.peak_bytes);  // the same requests, counted twice
  EXPECT_EQ(c.reserved_peak_bytes, 2 * 1024 * 1024);
  EXPECT_EQ(c.segments_peak, 1);
  // Every tensor is under 512 bytes, so each takes one 512-byte block: at the peak (672 requested
  // bytes in backward) 13 tensors are live, 13 * 512 = 6656.
  EXPECT_EQ(m.ledger.peak_bytes, 672);
  EXPECT_EQ(c.allocated_peak_bytes, 13 * 512);
  EXPECT_EQ(c.alloc_retries, 0);
  EXPECT_EQ(c.ooms, 0);
}

TEST(Workload, ModelCudaPredictsTheCachingAllocatorOnCpu) { ExpectTinyModelPrediction(Backend::kCpu); }
TEST(Workload, ModelCudaPredictsTheCachingAllocatorOnMeta) { ExpectTinyModelPrediction(Backend::kMeta); }
TEST(Workload, NoCudaModelWithoutTheFlag) {
  EXPECT_FALSE(MeasureVariant(TinyModel(), VariantMeasureOptions{}).cuda_model);
}

}  // namespace
}  // namespace oomguard
