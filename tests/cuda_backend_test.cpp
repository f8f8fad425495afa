// The cuda backend end to end: a tiny model measured on PyTorch's caching allocator. Every test here
// needs a GPU and skips without one, saying so; backend availability is checked everywhere.
#include <gtest/gtest.h>

#include "allocators/cards.h"
#include "allocators/cuda/cuda_cap.h"
#include "harness/backend_session.h"
#include "harness/workload.h"

namespace oomguard {
namespace {

VariantSpec TinyMlp() {
  VariantSpec v;
  v.name = "tiny";
  LayerSpec l1, relu, l2;
  l1.kind = "linear";
  l1.in = 64;
  l1.out = 256;
  relu.kind = "relu";
  l2.kind = "linear";
  l2.in = 256;
  l2.out = 10;
  v.model.layers = {l1, relu, l2};
  v.data.batch = 32;
  v.data.shape = {64};
  v.data.classes = 10;
  v.loop.loss = "cross_entropy";
  v.loop.optimizer.kind = "adam";
  return v;
}

TEST(CudaBackend, AvailabilitySaysWhyNot) {
  std::string why;
  EXPECT_TRUE(BackendAvailable("cpu", &why));
  EXPECT_TRUE(BackendAvailable("meta", &why));
  if (CudaDeviceCount() == 0) {
    EXPECT_FALSE(BackendAvailable("cuda", &why));
    EXPECT_EQ(why, "no GPU visible (the cuda backend needs one; try --backend cpu or meta)");
  } else {
    EXPECT_TRUE(BackendAvailable("cuda", &why));
  }
}

TEST(CudaBackendOnGpu, LedgerCountsTheRequestedBytesTheAllocatorReports) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no GPU visible (CUDA driver: " << CudaDriverVersion() << ")";
  std::string error;
  const CardPreset* t4 = FindCard("t4", &error);
  ASSERT_NE(t4, nullptr) << error;
  const VariantMeasurement m = MeasureVariant(TinyMlp(), MeasureOptions{"cuda", LimitsForCard(*t4)});
  ASSERT_EQ(m.outcome, "pass") << m.error;
  ASSERT_TRUE(m.cuda.has_value());
  // The feed (Note [The cuda ledger]) and the allocator's requested_bytes count the same requests, but
  // for the libraries' workspaces, taken before the measurement and held throughout (Note [Library
  // workspaces on cuda]; their sizes are multiples of 512, so requested equals allocated there).
  EXPECT_GT(m.cuda->allocated_at_start_bytes, 0);
  EXPECT_EQ(m.ledger.peak_bytes + m.cuda->allocated_at_start_bytes, m.cuda->requested_peak_bytes);
  EXPECT_GE(m.cuda->allocated_peak_bytes, m.cuda->requested_peak_bytes);  // rounded up to 512 bytes
  EXPECT_GE(m.cuda->reserved_peak_bytes, m.cuda->allocated_peak_bytes);
  EXPECT_EQ(m.cuda->ooms, 0);
  // Phase by phase too: both peaks start from what is live when the phase begins.
  ASSERT_EQ(m.cuda->phases.size(), m.ledger.phase_peaks.size());
  for (size_t i = 0; i < m.ledger.phase_peaks.size(); ++i) {
    EXPECT_EQ(m.cuda->phases[i].phase, m.ledger.phase_peaks[i].phase);
    EXPECT_EQ(m.cuda->phases[i].requested_bytes, m.ledger.phase_peaks[i].peak_bytes + m.cuda->allocated_at_start_bytes)
        << m.cuda->phases[i].phase;
  }
  EXPECT_EQ(m.transfers, 2);  // each iteration's batch, copied from the host
  EXPECT_EQ(m.cuda->timed_transfers, m.transfers);
  EXPECT_GT(m.cuda->transfer_ms, 0.0);
  // Parameters, gradients and Adam state are the same tensors as on cpu.
  const VariantMeasurement cpu = MeasureVariant(TinyMlp(), MeasureOptions{"cpu", LimitsForCard(*t4)});
  EXPECT_EQ(m.param_bytes, cpu.param_bytes);
  EXPECT_EQ(m.grad_bytes, cpu.grad_bytes);
  EXPECT_EQ(m.optimizer_state_bytes, cpu.optimizer_state_bytes);
}

TEST(CudaBackendOnGpu, ACapBelowTheModelIsAnOomWithTheCard) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no GPU visible (CUDA driver: " << CudaDriverVersion() << ")";
  VariantSpec big = TinyMlp();
  big.data.batch = 1 << 20;  // 256 MiB of activations in the first layer alone
  const VariantMeasurement m = MeasureVariant(big, MeasureOptions{"cuda", LimitsForCap(int64_t{64} << 20)});
  EXPECT_EQ(m.outcome, "oom") << m.error;
  // The simulated cap first, then PyTorch's own message (it names the physical GPU).
  EXPECT_EQ(m.error.rfind("CUDA out of memory on a GPU capped at 64.00 MiB (oomguard cap): tried to allocate ", 0), 0u)
      << m.error;
  EXPECT_NE(m.error.find("PyTorch's message, which names the physical GPU: CUDA out of memory. Tried to allocate"),
            std::string::npos)
      << m.error;
  ASSERT_TRUE(m.cuda.has_value());
  EXPECT_GE(m.cuda->ooms, 1);
  EXPECT_LE(m.cuda->reserved_peak_bytes, int64_t{64} << 20);  // the fraction caps reserved bytes
}

}  // namespace
}  // namespace oomguard
