// The comparison of two measurements that must agree to the byte: the same training on cpu and meta,
// or a module and the layer list it stands for. Peak and its phase, allocations and their bytes,
// phase peaks, live bytes at the peak by origin, the step's split and every iteration.
//
//   oomguard::testing::ExpectSameBytes(cpu, meta);
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "model/measurement.h"

namespace oomguard::testing {

// Every allocation too: meta sums two gradients in place as cpu does (Note [Gradient sums on meta],
// backends/meta/kernels/meta_kernels_promote.cpp).
inline void ExpectSameBytes(const VariantMeasurement& expected, const VariantMeasurement& actual) {
  EXPECT_EQ(actual.ledger.peak_bytes, expected.ledger.peak_bytes);
  EXPECT_EQ(actual.ledger.peak_phase, expected.ledger.peak_phase);
  EXPECT_EQ(actual.ledger.alloc_count, expected.ledger.alloc_count);
  EXPECT_EQ(actual.ledger.allocated_bytes_total, expected.ledger.allocated_bytes_total);
  ASSERT_EQ(actual.ledger.phase_peaks.size(), expected.ledger.phase_peaks.size());
  for (size_t i = 0; i < expected.ledger.phase_peaks.size(); ++i) {
    EXPECT_EQ(actual.ledger.phase_peaks[i].phase, expected.ledger.phase_peaks[i].phase);
    EXPECT_EQ(actual.ledger.phase_peaks[i].peak_bytes, expected.ledger.phase_peaks[i].peak_bytes)
        << "phase " << expected.ledger.phase_peaks[i].phase;
  }
  ASSERT_EQ(actual.ledger.peak_by_origin.size(), expected.ledger.peak_by_origin.size());
  for (size_t i = 0; i < expected.ledger.peak_by_origin.size(); ++i) {
    EXPECT_EQ(actual.ledger.peak_by_origin[i].phase, expected.ledger.peak_by_origin[i].phase);
    EXPECT_EQ(actual.ledger.peak_by_origin[i].peak_bytes, expected.ledger.peak_by_origin[i].peak_bytes);
  }
  EXPECT_EQ(actual.param_bytes, expected.param_bytes);
  EXPECT_EQ(actual.forward_saved_bytes, expected.forward_saved_bytes);
  EXPECT_EQ(actual.grad_bytes, expected.grad_bytes);
  EXPECT_EQ(actual.optimizer_state_bytes, expected.optimizer_state_bytes);
  ASSERT_EQ(actual.iterations.size(), expected.iterations.size());
  for (size_t i = 0; i < expected.iterations.size(); ++i) {
    EXPECT_EQ(actual.iterations[i].peak_bytes, expected.iterations[i].peak_bytes) << "iteration " << i;
    EXPECT_EQ(actual.iterations[i].live_after_backward_bytes, expected.iterations[i].live_after_backward_bytes);
    EXPECT_EQ(actual.iterations[i].live_after_bytes, expected.iterations[i].live_after_bytes);
  }
}

}  // namespace oomguard::testing
