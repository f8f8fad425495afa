// The results of `oomguard run`, as data: what the runner produces and every report renders.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/shard.h"
#include "model/measurement.h"
#include "model/result_code.h"

namespace oomguard {

// A scenario's analytic estimate beside what was measured (verdict/memory_estimate.h computes it).
struct EstimateRow {
  std::string component;            // "parameters", "gradients", "optimizer state", "activations", "rest", "peak"
  std::optional<int64_t> measured;  // absent: not measured (the run ended first)
  int64_t estimated = 0;
};

struct MemoryEstimate {
  int64_t parameter_count = 0;
  std::string activation_formula;  // "1 x 2048 x 4096 x 32 blocks x 2 bytes x 34"
  std::vector<EstimateRow> rows;
};

struct CheckResult {
  std::string expression;
  bool evaluable = false;
  bool holds = false;
  bool skipped = false;  // needs data the backend does not have (grads on meta): neither holds nor fails
  std::string explanation;
};

// How a measured metric compares with its stored baseline (baseline_diff.h computes these).
enum class BaselineVerdict {
  kUnchanged,   // within tolerance
  kImproved,    // better (lower) beyond tolerance: passes, and suggests --update-baselines
  kRegressed,   // worse (higher) beyond tolerance: the variant fails
  kNew,         // no baseline stored for this scenario/variant/backend/card (fails under --strict)
  kNotCompared  // nothing to compare: the variant did not produce a measurement, or no baselines asked for
};

std::string_view BaselineVerdictName(BaselineVerdict verdict);  // "unchanged", "improved", ...
// Severity order: not compared < unchanged < improved < new < regressed.
BaselineVerdict WorseBaselineVerdict(BaselineVerdict a, BaselineVerdict b);

struct MetricDiff {
  std::string metric;  // "peak_bytes", "phase_peak.backward", "live_after[2]", "alloc_count"
  int64_t baseline = 0;
  int64_t current = 0;
  int64_t delta = 0;         // current - baseline
  double delta_percent = 0;  // 100 * delta / baseline (0 when baseline is 0)
  BaselineVerdict verdict = BaselineVerdict::kUnchanged;
};

struct BaselineComparison {
  BaselineVerdict verdict = BaselineVerdict::kNotCompared;  // the worst of the metrics'
  std::vector<MetricDiff> metrics;                          // peak first; only metrics present on both sides
  std::string baseline_file;                                // where the baseline lives (or would live, for kNew)
};

// The peak's diff, which tables show (the comparison lists it first); the first metric's when the peak
// was not compared; null without metrics.
const MetricDiff* PeakDiff(const BaselineComparison& comparison);

struct VariantResult {
  std::string name;
  ResultCode code = ResultCode::kUnresolved;
  VariantOutcome expected_outcome;
  bool expected_leak = false;
  std::string xfail_reason;                       // non-empty when marked xfail
  std::vector<std::string> reasons;               // why it is not PASS, one line each
  std::vector<CheckResult> checks;                // the variant's own check expressions
  std::optional<VariantMeasurement> measurement;  // absent when the child crashed or timed out
  std::string diagnostics;                        // the end of the child's stderr when it did not report
  // UNRESOLVED because the input is wrong (a workload and its scenario disagree), not the machine:
  // the run exits 2 (base/exit_codes.h), as for a file that does not load.
  bool input_error = false;
  BaselineComparison baseline;             // set when the run compares with baselines
  std::optional<MemoryEstimate> estimate;  // the scenario's analytic estimate next to the measurement
};

struct ScenarioResult {
  std::string name;
  std::string file;
  std::string summary;
  std::string backend;
  std::string card;  // simulated card's name, empty for a plain cap
  int64_t cap_bytes = 0;
  ResultCode code = ResultCode::kUnresolved;
  std::string error;         // UNRESOLVED/UNSUPPORTED: why
  bool input_error = false;  // UNRESOLVED for an input error (the file, its limits, its workload): exit 2
  std::vector<VariantResult> variants;
  std::vector<CheckResult> checks;  // relations between variants
  double duration_ms = 0;
};

// How much of the whole run a shard took (--shard, GoogleTest's variables): "shard 2/3: 6 of 17
// scenario files". Not sharded: shard.count is 0 and files == run_files.
struct ShardTally {
  Shard shard;
  int files = 0;               // the scenario files this shard took (run, unresolved or skipped)
  int run_files = 0;           // the whole run's scenario files, every shard's
  int selected_run_files = 0;  // of run_files, those --filter selects, in any shard
};

struct RunResults {
  std::vector<ScenarioResult> scenarios;  // in catalog order
  // SKIPPED: what --filter did not select, in catalog order, each with its reason in `error` and no
  // variants. Kept apart so that a writer listing what ran shows only that: the console counts these
  // in its summary, JUnit writes them as <skipped/>, the results JSON and the others leave them out.
  std::vector<ScenarioResult> skipped;
  // Both lists hold only this shard's files; the others' are neither run nor reported, as GoogleTest does.
  ShardTally shard;
  // What the plan passed over without a result, one line each, so nothing drops out unseen: a results
  // file found among the scenarios (run/plan.h rule 1). The console prints them under the totals.
  std::vector<std::string> notes;
  bool compared_with_baselines = false;  // --baselines / the catalog's stored baselines were read
  bool strict = false;                   // --strict: a variant without a baseline fails
  bool updating_baselines = false;       // --update-baselines: no writer suggests running it
  std::string oomguard_version;          // filled by the runner; fixed in report tests
  std::string libtorch_version;
  std::string backend;
  int jobs = 1;
  int64_t iterations = 0;  // 0: each scenario's own
  double duration_ms = 0;  // the run's wall time
  // How its variants' processes started (Note [Warm children], run/runner.cpp): "forked" from the
  // runner, warm, or "spawned" afresh, with the reason in children_reason. Empty: not a runner's run.
  std::string children;
  std::string children_reason;
};

// Where a run's time went: its wall time against what its variants' processes and their measurements
// took, per job. wall_per_measured is 1.0 when the run costs only its measurements.
struct RunOverhead {
  double wall_ms = 0;
  double children_ms = 0;  // the variants' processes, start to exit, summed
  double measured_ms = 0;  // their measurements (measurement.duration_ms), summed
  int jobs = 1;
  double wall_per_measured = 0;  // wall_ms / (measured_ms / jobs); 0 when nothing was measured
};
RunOverhead OverheadOf(const RunResults& report);

// Whether a scenario or a variant is UNRESOLVED for an input error (the run then exits 2).
bool HasInputError(const RunResults& report);

}  // namespace oomguard
