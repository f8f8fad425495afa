// Compares what a run measured with the stored baselines, as data (BaselineComparison in
// run_results.h); every report renders the same comparison.
//
// Verdicts per metric: regressed when current - baseline exceeds the tolerance, improved when
// baseline - current does, unchanged otherwise; a variant's verdict is its worst metric's. Compared:
// peak_bytes, phase_peak.<phase>, live_after[N] and alloc_count, where both sides have them.
#pragma once

#include <string>

#include "baselines/baseline_store.h"
#include "model/run_results.h"

namespace oomguard {

BaselineComparison CompareWithBaseline(const BaselineFile& file, const std::string& path, const VariantMeasurement& m);

// Fills every measured variant's comparison; a regression turns the variant into FAIL, and so does a
// missing baseline under `strict`; the scenario's code follows.
void ApplyBaselines(const BaselineFile& file, const std::string& path, bool strict, ScenarioResult* result);

}  // namespace oomguard
