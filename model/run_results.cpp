#include "model/run_results.h"

#include <algorithm>

namespace oomguard {
namespace {

int Severity(BaselineVerdict v) {
  switch (v) {
    case BaselineVerdict::kNotCompared:
      return 0;
    case BaselineVerdict::kUnchanged:
      return 1;
    case BaselineVerdict::kImproved:
      return 2;
    case BaselineVerdict::kNew:
      return 3;
    case BaselineVerdict::kRegressed:
      return 4;
  }
  return 0;
}

}  // namespace

std::string_view BaselineVerdictName(BaselineVerdict verdict) {
  switch (verdict) {
    case BaselineVerdict::kUnchanged:
      return "unchanged";
    case BaselineVerdict::kImproved:
      return "improved";
    case BaselineVerdict::kRegressed:
      return "regressed";
    case BaselineVerdict::kNew:
      return "new";
    case BaselineVerdict::kNotCompared:
      return "not compared";
  }
  return "not compared";
}

const MetricDiff* PeakDiff(const BaselineComparison& comparison) {
  for (const MetricDiff& d : comparison.metrics) {
    if (d.metric == "peak_bytes") return &d;
  }
  return comparison.metrics.empty() ? nullptr : &comparison.metrics.front();
}

BaselineVerdict WorseBaselineVerdict(BaselineVerdict a, BaselineVerdict b) { return Severity(b) > Severity(a) ? b : a; }

RunOverhead OverheadOf(const RunResults& report) {
  RunOverhead o;
  o.wall_ms = report.duration_ms;
  o.jobs = std::max(report.jobs, 1);
  for (const ScenarioResult& s : report.scenarios) {
    o.children_ms += s.duration_ms;
    for (const VariantResult& v : s.variants) {
      if (v.measurement) o.measured_ms += v.measurement->duration_ms;
    }
  }
  if (o.measured_ms > 0) o.wall_per_measured = o.wall_ms / (o.measured_ms / o.jobs);
  return o;
}

bool HasInputError(const RunResults& report) {
  for (const ScenarioResult& s : report.scenarios) {
    if (s.input_error) return true;
    for (const VariantResult& v : s.variants) {
      if (v.input_error) return true;
    }
  }
  return false;
}

}  // namespace oomguard
