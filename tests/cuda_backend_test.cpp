// The cuda backend end to end: a tiny model measured on PyTorch's caching allocator. Every test here
// needs a GPU and skips without one, saying so; backend availability is checked everywhere.
#include <c10/cuda/CUDACachingAllocator.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "allocators/cards.h"
#include "allocators/cuda/cuda_cap.h"
#include "backends/backend.h"
#include "base/child_process.h"
#include "tests/scratch_folder.h"
#include "workload/workload.h"

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
  EXPECT_TRUE(GetBackend(Backend::kCpu).Available(&why));
  EXPECT_TRUE(GetBackend(Backend::kMeta).Available(&why));
  if (CudaDeviceCount() == 0) {
    EXPECT_FALSE(GetBackend(Backend::kCuda).Available(&why));
    EXPECT_EQ(why, "no GPU visible (the cuda backend needs one; try --backend cpu or meta)");
    EXPECT_EQ(ResolveBackend("auto"), Backend::kCpu);
  } else {
    EXPECT_TRUE(GetBackend(Backend::kCuda).Available(&why));
    EXPECT_EQ(ResolveBackend("auto"), Backend::kCuda);
  }
}

TEST(CudaBackendOnGpu, LedgerCountsTheRequestedBytesTheAllocatorReports) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no GPU visible (CUDA driver: " << CudaDriverVersion() << ")";
  std::string error;
  const CardPreset* t4 = FindCard("t4", &error);
  ASSERT_NE(t4, nullptr) << error;
  const VariantMeasurement m =
      MeasureVariant(TinyMlp(), VariantMeasureOptions{.backend = Backend::kCuda, .limits = LimitsForCard(*t4)});
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
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
  const VariantMeasurement cpu =
      MeasureVariant(TinyMlp(), VariantMeasureOptions{.backend = Backend::kCpu, .limits = LimitsForCard(*t4)});
  EXPECT_EQ(m.param_bytes, cpu.param_bytes);
  EXPECT_EQ(m.grad_bytes, cpu.grad_bytes);
  EXPECT_EQ(m.optimizer_state_bytes, cpu.optimizer_state_bytes);
}

TEST(CudaBackendOnGpu, ACapBelowTheModelIsAnOomWithTheCard) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no GPU visible (CUDA driver: " << CudaDriverVersion() << ")";
  VariantSpec big = TinyMlp();
  big.data.batch = 1 << 20;  // 256 MiB of activations in the first layer alone
  const VariantMeasurement m =
      MeasureVariant(big, VariantMeasureOptions{.backend = Backend::kCuda, .limits = LimitsForCap(int64_t{64} << 20)});
  EXPECT_EQ(Name(m.outcome), "oom") << m.error;
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

// Runs the current test alone in a fresh process of this binary; its exit code and output. For tests
// that need CUDA uninitialised when an earlier test in this process (ci/gpu_check.sh runs them all in
// one) has initialised it.
int RerunAlone(std::string* output) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);  // Note [No std::filesystem]
  if (n <= 0) return -1;
  testing::ScratchFolder folder("rerun");
  ChildSpec spec;
  spec.argv = {std::string(self, static_cast<size_t>(n)),
               std::string("--gtest_filter=") + test->test_suite_name() + "." + test->name()};
  spec.stdout_path = spec.stderr_path = folder.path() + "/output.txt";
  setenv("OOMGUARD_RERUN_ALONE", "1", 1);
  ChildExit exit;
  RunChildren({spec}, 1, [&exit](size_t, const ChildExit& e) { exit = e; });
  unsetenv("OOMGUARD_RERUN_ALONE");
  std::ostringstream text;
  text << std::ifstream(spec.stdout_path).rdbuf();
  *output = DescribeExit(exit, spec.timeout_seconds) + "\n" + text.str();
  return exit.spawn_error.empty() && !exit.timed_out ? exit.exit_code : -1;
}

TEST(CudaBackendOnGpu, InjectedFaultInBackwardLeavesTheCachingAllocatorAndItsStatistics) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no GPU visible (CUDA driver: " << CudaDriverVersion() << ")";
  // The fault-injecting allocator goes in before CUDA initialises, once per process.
  if (c10::cuda::CUDACachingAllocator::get()->initialized()) {
    ASSERT_EQ(std::getenv("OOMGUARD_RERUN_ALONE"), nullptr) << "CUDA initialised before the test, even alone";
    std::string output;
    EXPECT_EQ(RerunAlone(&output), 0) << output;
    return;
  }
  std::string error;
  Limits limits = LimitsForCard(*FindCard("t4", &error));
  std::unique_ptr<FaultPolicy> policy = ParseFaultSpec("phase=backward,nth=1", &error);
  ASSERT_NE(policy, nullptr) << error;
  limits.faults = std::make_shared<FaultInjector>(std::move(policy));
  const VariantMeasurement m =
      MeasureVariant(TinyMlp(), VariantMeasureOptions{.backend = Backend::kCuda, .limits = limits});
  EXPECT_EQ(Name(m.outcome), "oom") << m.error;
  EXPECT_NE(m.error.find("CUDA out of memory (injected by oomguard: phase=backward,nth=1, allocation #"),
            std::string::npos)
      << m.error;
  ASSERT_TRUE(m.oom.has_value());
  EXPECT_TRUE(m.oom->injected);
  EXPECT_EQ(m.oom->phase, "backward");
  ASSERT_EQ(m.injected.size(), 1u);
  EXPECT_EQ(m.injected[0].phase, "backward");
  // The caching allocator never saw the refused request, and its statistics read as without injection.
  ASSERT_TRUE(m.cuda.has_value());
  EXPECT_EQ(m.cuda->ooms, 0);
  EXPECT_GT(m.cuda->reserved_peak_bytes, 0);
  EXPECT_GE(m.cuda->allocated_peak_bytes, m.cuda->requested_peak_bytes);
  EXPECT_EQ(m.ledger.peak_bytes + m.cuda->allocated_at_start_bytes,
            m.cuda->requested_peak_bytes);  // the trace still feeds the ledger
}

}  // namespace
}  // namespace oomguard
