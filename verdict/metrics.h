// Answers check expressions' metric names (metric_names.h) from a VariantMeasurement.
#pragma once

#include <optional>
#include <string>

#include "model/measurement.h"
#include "verdict/check_evaluator.h"

namespace oomguard {

// `metric` in canonical form: "peak", "phase_peak.eval", "live_after[2]". nullopt when the measurement
// does not have it (an iteration that did not run, a phase never entered, a digest not taken).
std::optional<MetricValue> LookupMetric(const VariantMeasurement& m, const std::string& metric);

}  // namespace oomguard
