// Compares what a run measured with the stored baselines, as data (BaselineComparison in
// run_results.h); every report renders the same comparison, and the verdict weighs its failures.
//
//   const BaselineComparison c = oomguard::CompareWithBaseline(file, path, measurement);
//   evidence.baseline_failures = oomguard::BaselineFailures(c, /*strict=*/false);
//
// Verdicts per metric: regressed when current - baseline exceeds the tolerance, improved when
// baseline - current does, unchanged otherwise; a variant's verdict is its worst metric's. Compared:
// peak_bytes, phase_peak.<phase>, live_after[N] and alloc_count, where both sides have them.
#pragma once

#include <string>
#include <vector>

#include "baselines/baseline_store.h"
#include "model/run_results.h"

namespace oomguard {

BaselineComparison CompareWithBaseline(const BaselineFile& file, const std::string& path, const VariantMeasurement& m);

// What of a comparison fails its variant, one line each: every regressed metric ("regression:
// peak_bytes 11.00 MiB vs baseline 10.00 MiB (+1024.00 KiB, +10.0%)"), and under `strict` a missing
// baseline ("no baseline in FILE (--strict); record one with --update-baselines"). Evidence for the
// verdict (verdict/verdict.h), which decides the code; empty when the comparison passes.
std::vector<std::string> BaselineFailures(const BaselineComparison& comparison, bool strict);

}  // namespace oomguard
