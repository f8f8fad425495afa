// One real rank's numbers against the rank meta simulates alone, to the byte (Note [Real ranks on
// cpu], workload/parallel/rank_group.h): shared by the layer lists' check (real_ranks_test.cpp) and a registered
// workload's (workload_ranks_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "model/measurement.h"

namespace oomguard::testing {

// Rank `cpu` of a cpu run, as its child measured it, against meta's one simulated rank of that number.
inline void ExpectRankEqualsMeta(const RankMeasurement& cpu, const VariantMeasurement& meta, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(Name(cpu.outcome), "pass") << cpu.error;
  EXPECT_EQ(Name(meta.outcome), "pass") << meta.error;
  EXPECT_EQ(cpu.peak_bytes, meta.ledger.peak_bytes);
  EXPECT_EQ(cpu.peak_phase, meta.ledger.peak_phase);
  ASSERT_EQ(cpu.phase_peaks.size(), meta.ledger.phase_peaks.size());
  for (size_t k = 0; k < cpu.phase_peaks.size(); ++k) {
    EXPECT_EQ(cpu.phase_peaks[k].phase, meta.ledger.phase_peaks[k].phase);
    EXPECT_EQ(cpu.phase_peaks[k].peak_bytes, meta.ledger.phase_peaks[k].peak_bytes) << cpu.phase_peaks[k].phase;
  }
  ASSERT_EQ(cpu.iterations.size(), meta.iterations.size());
  for (size_t k = 0; k < cpu.iterations.size(); ++k) {
    EXPECT_EQ(cpu.iterations[k].peak_bytes, meta.iterations[k].peak_bytes) << "iteration " << k + 1;
    EXPECT_EQ(cpu.iterations[k].live_after_backward_bytes, meta.iterations[k].live_after_backward_bytes);
    EXPECT_EQ(cpu.iterations[k].live_after_bytes, meta.iterations[k].live_after_bytes) << "iteration " << k + 1;
  }
  EXPECT_EQ(cpu.param_bytes, meta.param_bytes);
  EXPECT_EQ(cpu.grad_bytes, meta.grad_bytes);
  EXPECT_EQ(cpu.optimizer_state_bytes, meta.optimizer_state_bytes);
  ASSERT_TRUE(meta.parallel.has_value());
  EXPECT_EQ(cpu.communication_bytes, meta.parallel->communication_bytes);
}

}  // namespace oomguard::testing
