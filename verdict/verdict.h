// Verdicts: the evidence about a scenario that ran (what each child reported, the expectations, the
// baseline comparison) turned into result codes, each decided once. The runner gathers the evidence;
// this is where outcomes, leaks, checks, regressions and child failures become codes, and the only
// place an xfail mark remaps one. (A scenario that does not run gets its code from the plan,
// run/plan.h: UNRESOLVED, UNSUPPORTED or SKIPPED.)
//
//   ScenarioEvidence evidence;
//   evidence.variants.push_back({.name = "base", .expectation = e, .measurement = m});
//   const ScenarioResult result = oomguard::JudgeScenario(scenario, planned_header, evidence);
//
// Note [XFail applies last]: as in lit, an xfail mark applies to the final code of a variant, after
// every reason it could fail was gathered: its outcome, a leak, its checks and its baselines (a
// regression, or no baseline under --strict). An xfail variant that fails for any of these reasons is
// XFAIL; one with no reason to fail is XPASS ("marked xfail (why) but passed"), a failure, because the
// mark is stale. A child that crashed or hung stays UNRESOLVED or TIMEOUT: nothing was measured that
// the mark could be about. A scenario's code is the worst of its variants' final codes and of its
// relations (a failed relation is FAIL; an unreadable baseline file is UNRESOLVED).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/run_results.h"
#include "model/scenario.h"

namespace oomguard {

// Everything the verdict weighs about one variant.
struct VariantEvidence {
  std::string name;
  VariantExpectation expectation;
  // What the child reported; absent when it crashed, hung, or wrote no measurement that parsed.
  std::optional<VariantMeasurement> measurement;
  // Without a measurement: how the child ended.
  bool timed_out = false;
  std::string exit;         // "crashed with signal 11 (Segmentation fault)", "timed out after 1 s"
  std::string diagnostics;  // the end of its stderr
  bool input_error = false;  // it exited kExitUsage: the input is wrong, not the machine
  // The comparison with the stored baseline (kNotCompared when there was none to make), and what of
  // it fails the variant (baselines/baseline_diff.h BaselineFailures): empty under --update-baselines.
  BaselineComparison baseline;
  std::vector<std::string> baseline_failures;
};

struct ScenarioEvidence {
  std::vector<VariantEvidence> variants;  // in the scenario's order
  std::string baseline_error;             // non-empty: the baseline file could not be read
};

// One variant's result, its code decided once, xfail last (Note [XFail applies last]).
VariantResult JudgeVariant(const VariantEvidence& evidence);

// The scenario's result: `header` (name, file, summary, backend, card, cap_bytes, from the plan) with
// every variant judged, the relations between variants evaluated, and the scenario's code. A header
// that already holds variants, checks or an error was judged before: a programmer bug (checked).
ScenarioResult JudgeScenario(const Scenario& scenario, ScenarioResult header, const ScenarioEvidence& evidence);

// A verdict reached outside the runner: the pytest plugin's (python/core.cpp), where pytest decided
// each test's outcome. The variant takes that code; the scenario, once its variants are in, the worst.
void RecordOutcome(VariantResult& variant, ResultCode code);
void RecordScenarioOutcome(ScenarioResult& scenario);

}  // namespace oomguard
