#include "model/measurement.h"

namespace oomguard {

std::optional<double> LiveGrowthPerIteration(const VariantMeasurement& m) {
  if (m.iterations.size() < 2) return std::nullopt;
  return static_cast<double>(m.iterations.back().live_after_bytes - m.iterations.front().live_after_bytes) /
         static_cast<double>(m.iterations.size() - 1);
}

}  // namespace oomguard
