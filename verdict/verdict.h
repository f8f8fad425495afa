// Verdicts: applies a scenario's expectations to what its variants measured. The only place outcomes,
// leaks and checks become result codes (xfail remapping happens in ApplyXFail, result_code.h).
#pragma once

#include <map>

#include "model/run_results.h"
#include "model/scenario.h"

namespace oomguard {

// Judges one variant that produced a measurement.
VariantResult JudgeVariant(const std::string& name, const VariantExpectation& expectation,
                           const VariantMeasurement& measurement);

// Evaluates the scenario's relations over its variants and sets every code: the scenario's is the
// worst of its variants' and its checks'. Variants without a measurement keep the code they have.
void JudgeScenario(const Scenario& scenario, ScenarioResult* result);

}  // namespace oomguard
