// What oomguard::Measure (in_process_measure.cpp) and oomguard::MeasureScope (measure_scope.cpp) share:
// the process-wide lock, the options as the harness takes them, and the public Measurement made from
// the harness's. Not part of the public API.
//
// Errors: HarnessOptions throws std::invalid_argument for bad options (oomguard/measure.h).
#pragma once

#include <mutex>

#include "model/measurement.h"
#include "oomguard/measure.h"
#include "workload/workload.h"

namespace oomguard {

// Held while a measurement runs (Note [What an in-process measurement resets], oomguard/measure.h).
std::mutex& MeasureMutex();
VariantMeasureOptions HarnessOptions(const MeasureOptions& options);
Measurement ToPublic(const VariantMeasurement& m);

}  // namespace oomguard
