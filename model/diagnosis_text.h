// The words every report, and Measurement::Describe, use for a diagnosis (model/diagnosis.h): what
// its bytes count and what a measured fix gave, so that the console, Markdown, JUnit, HTML and the
// matchers' messages say the same thing.
//
//   DiagnosisAmount(d);            // "2.00 MiB after backward", "1.26 MiB per iteration"
//   MeasuredFixText(fix, m_peak);  // "loop.eval.no_grad: true: peak 8.73 MiB (-18.50 MiB), live after 1.52 MiB"
#pragma once

#include <cstdint>
#include <string>

#include "model/diagnosis.h"

namespace oomguard {

std::string DiagnosisAmount(const Diagnosis& d);

// "diagnosis eval-keeps-graph" or "advice activations-dominate".
std::string DiagnosisLabel(const Diagnosis& d);

// The fix, its rerun's outcome when it did not pass, its peak against `peak_bytes` (the diagnosed
// run's) and its live bytes after the last iteration.
std::string MeasuredFixText(const MeasuredFix& fix, int64_t peak_bytes);

}  // namespace oomguard
