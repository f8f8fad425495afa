#include "reports/results_json.h"

#include "base/atomic_file.h"
#include "base/json_text.h"
#include "model/measurement_json.h"

namespace oomguard {

using nlohmann::json;

namespace {

json EstimateToJson(const MemoryEstimate& e) {
  json rows = json::array();
  for (const EstimateRow& r : e.rows) {
    rows.push_back({{"component", r.component},
                    {"measured", r.measured ? json(*r.measured) : json(nullptr)},
                    {"estimated", r.estimated},
                    {"off_by", r.measured ? json(*r.measured - r.estimated) : json(nullptr)}});
  }
  return {{"parameter_count", e.parameter_count}, {"activation_formula", e.activation_formula}, {"rows", rows}};
}

json ChecksToJson(const std::vector<CheckResult>& checks) {
  json out = json::array();
  for (const CheckResult& c : checks) {
    out.push_back({{"expression", c.expression},
                   {"evaluable", c.evaluable},
                   {"holds", c.holds},
                   {"skipped", c.skipped},
                   {"explanation", c.explanation}});
  }
  return out;
}

}  // namespace

json ResultsToJson(const RunResults& report) {
  json j;
  j["schema_version"] = kResultsSchemaVersion;
  j["oomguard_version"] = report.oomguard_version;
  j["libtorch_version"] = report.libtorch_version;
  j["backend"] = report.backend;
  j["jobs"] = report.jobs;
  j["iterations_override"] = report.iterations;
  j["duration_ms"] = report.duration_ms;
  j["children"] = report.children;
  j["children_reason"] = report.children_reason;
  const RunOverhead overhead = OverheadOf(report);
  j["overhead"] = {{"wall_ms", overhead.wall_ms},
                   {"children_ms", overhead.children_ms},
                   {"measured_ms", overhead.measured_ms},
                   {"jobs", overhead.jobs},
                   {"wall_per_measured", overhead.wall_per_measured}};
  j["compared_with_baselines"] = report.compared_with_baselines;
  j["strict"] = report.strict;
  json totals = json::object();
  json scenarios = json::array();
  for (const ScenarioResult& s : report.scenarios) {
    const std::string code(ResultName(s.code));
    totals[code] = totals.value(code, 0) + 1;
    json variants = json::array();
    for (const VariantResult& v : s.variants) {
      json jv = {{"name", v.name},
                 {"result", std::string(ResultName(v.code))},
                 {"expected_outcome", Name(v.expected_outcome)},
                 {"expected_leak", v.expected_leak},
                 {"reasons", v.reasons},
                 {"checks", ChecksToJson(v.checks)}};
      if (!v.xfail_reason.empty()) jv["xfail"] = v.xfail_reason;
      if (!v.diagnostics.empty()) jv["diagnostics"] = v.diagnostics;
      if (v.measurement) jv["measurement"] = MeasurementToJson(*v.measurement);
      if (v.estimate) jv["estimate"] = EstimateToJson(*v.estimate);
      json metrics = json::array();
      for (const MetricDiff& d : v.baseline.metrics) {
        metrics.push_back({{"metric", d.metric},
                           {"baseline", d.baseline},
                           {"current", d.current},
                           {"delta", d.delta},
                           {"delta_percent", d.delta_percent},
                           {"verdict", std::string(BaselineVerdictName(d.verdict))}});
      }
      jv["baseline"] = {{"verdict", std::string(BaselineVerdictName(v.baseline.verdict))},
                        {"file", v.baseline.baseline_file},
                        {"metrics", metrics}};
      variants.push_back(std::move(jv));
    }
    scenarios.push_back({{"name", s.name},
                         {"file", s.file},
                         {"summary", s.summary},
                         {"result", std::string(ResultName(s.code))},
                         {"error", s.error},
                         {"backend", s.backend},
                         {"card", s.card},
                         {"cap_bytes", s.cap_bytes},
                         {"duration_ms", s.duration_ms},
                         {"variants", variants},
                         {"checks", ChecksToJson(s.checks)}});
  }
  j["totals"] = totals;
  j["scenarios"] = scenarios;
  return j;
}

bool WriteResultsJson(const RunResults& report, const std::string& path, std::string* error) {
  return WriteFileAtomically(path, DumpJson(ResultsToJson(report), 2) + "\n", error);
}

}  // namespace oomguard
