// A variant's measurement as a baseline records it, for the baseline tests: cpu on a T4 under a 1 MB cap,
// `peak` at backward and 90% of it at forward, two iterations.
#pragma once

#include <cstdint>
#include <string>

#include "model/measurement.h"

namespace oomguard::testing {

inline VariantMeasurement Measured(const std::string& variant, int64_t peak) {
  VariantMeasurement m;
  m.ledger.peak_bytes = peak;
  m.ledger.alloc_count = 10;
  m.ledger.phase_peaks = {{"forward", peak * 9 / 10}, {"backward", peak}};
  m.iterations = {{peak, 50, 40}, {peak, 50, 40}};
  m.variant = variant;
  m.backend = "cpu";
  m.card = "NVIDIA T4 16GB";
  m.cap_bytes = 1000000;
  return m;
}

}  // namespace oomguard::testing
