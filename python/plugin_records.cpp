#include "python/plugin_records.h"

#include <pybind11/stl.h>
#include <torch/headeronly/version.h>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "allocators/ledger.h"
#include "backends/version_info.h"
#include "baselines/baseline_diff.h"
#include "baselines/baseline_store.h"
#include "model/phase.h"
#include "reports/report_format.h"
#include "verdict/verdict.h"

namespace py = pybind11;

// ---- The pytest plugin's baselines and reports (oomguard/pytest_plugin.py) ----------------------------
// Note [One implementation of baselines]: the plugin keeps its numbers in the CLI's baseline files
// (baselines/baseline_store.h: same JSON, same tolerance rules, same atomic and locked updates) and
// writes the CLI's reports (reports/report_registry.h), by handing this code the records it made of
// each test (oomguard/report.py, record_of), which cross the forked child's pipe as JSON. A test module
// is a scenario (the file tests.test_models.json), a test a variant ("test_over", "TestX::test_y[2]").
namespace plugin {

using namespace oomguard;

namespace {

// The record as the runner's VariantMeasurement, with what baselines and reports read (the inverse of
// ToPublic, run/in_process_measure.h; phases in name order, no timeline).
VariantMeasurement VariantFromRecord(const py::dict& r) {
  VariantMeasurement m;
  m.variant = Get<std::string>(r, "variant");
  m.backend = Get<std::string>(r, "backend");
  m.card = Get<std::string>(r, "card");
  m.kernels = Get<std::string>(r, "kernels", "cpu");  // baselines key card mode's entries apart
  if (!Get<std::string>(r, "process_group").empty()) {  // a rank (world=N, or torchrun's): keyed apart too
    m.parallel = ParallelMeasurement{.world = Get<int64_t>(r, "world", 1), .rank = Get<int64_t>(r, "rank", 0)};
  }
  const auto cap = Get<int64_t>(r, "cap_bytes", -1);
  m.cap_bytes = cap < 0 ? Ledger::kUnlimited : cap;  // no cap, as the CLI keys it
  if (!Parse(Get<std::string>(r, "outcome", "pass"), &m.outcome)) m.outcome = VariantOutcome::Error(ErrorCategory::kError);
  m.error = Get<std::string>(r, "error");
  m.duration_ms = Get<double>(r, "duration_ms");
  m.ledger.peak_bytes = Get<int64_t>(r, "peak_bytes");
  m.ledger.peak_phase = Get<std::string>(r, "peak_phase");
  m.ledger.alloc_count = Get<int64_t>(r, "alloc_count");
  for (const auto& [phase, bytes] : Get<std::map<std::string, int64_t>>(r, "phase_peak_bytes")) {
    m.ledger.phase_peaks.push_back({phase, bytes});
  }
  const auto live = Get<std::vector<int64_t>>(r, "live_after_iteration");
  const auto peaks = Get<std::vector<int64_t>>(r, "iteration_peak_bytes");
  for (size_t i = 0; i < live.size(); ++i) {
    IterationMeasurement it;
    it.live_after_bytes = live[i];
    it.peak_bytes = i < peaks.size() ? peaks[i] : 0;
    m.iterations.push_back(it);
  }
  if (r.contains("breakdown") && !r["breakdown"].is_none()) {
    const py::dict b = r["breakdown"];
    m.param_bytes = Get<int64_t>(b, "parameters");
    m.grad_bytes = Get<std::optional<int64_t>>(b, "gradients");
    m.optimizer_state_bytes = Get<std::optional<int64_t>>(b, "optimizer_state");
    m.forward_saved_bytes = Get<std::optional<int64_t>>(b, "forward_saved");
  }
  if (r.contains("cuda_model") && !r["cuda_model"].is_none()) {  // the Markdown's reserved column
    const py::dict c = r["cuda_model"];
    m.cuda_model = CudaModelMeasurement{Get<int64_t>(c, "allocated_peak_bytes"),
                                        Get<int64_t>(c, "reserved_peak_bytes"),
                                        Get<int64_t>(c, "requested_peak_bytes"),
                                        Get<int64_t>(c, "segments_peak"),
                                        Get<int64_t>(c, "alloc_retries"),
                                        Get<int64_t>(c, "ooms"),
                                        Get<bool>(c, "decides"),
                                        Get<int64_t>(c, "allocated_at_start_bytes"),
                                        Get<int64_t>(c, "reserved_at_start_bytes")};
  }
  if (r.contains("cuda") && !r["cuda"].is_none()) {  // backend "cuda": the GPU's own allocator
    const py::dict c = r["cuda"];
    CudaMeasurement cuda;
    cuda.allocated_peak_bytes = Get<int64_t>(c, "allocated_peak_bytes");
    cuda.reserved_peak_bytes = Get<int64_t>(c, "reserved_peak_bytes");
    cuda.active_peak_bytes = Get<int64_t>(c, "active_peak_bytes");
    cuda.requested_peak_bytes = Get<int64_t>(c, "requested_peak_bytes");
    cuda.alloc_retries = Get<int64_t>(c, "alloc_retries");
    cuda.ooms = Get<int64_t>(c, "ooms");
    cuda.allocated_at_start_bytes = Get<int64_t>(c, "allocated_at_start_bytes");
    cuda.reserved_at_start_bytes = Get<int64_t>(c, "reserved_at_start_bytes");
    m.cuda = std::move(cuda);
  }
  m.warnings = Get<std::vector<std::string>>(r, "warnings");
  m.steady_state = Get<std::string>(r, "steady_state");
  for (const py::handle h : Get<py::list>(r, "diagnoses")) {
    const py::dict d = py::reinterpret_borrow<py::dict>(h);
    Diagnosis out;
    if (!Parse(Get<std::string>(d, "kind"), &out.kind)) continue;  // a kind this build does not know
    if (!Parse(Get<std::string>(d, "per", "peak"), &out.per)) out.per = DiagnosisPer::kPeak;
    out.bytes = Get<int64_t>(d, "bytes");
    out.phase = Get<std::string>(d, "phase");
    out.where = Get<std::string>(d, "where");
    out.message = Get<std::string>(d, "message");
    out.fix = Get<std::string>(d, "fix");
    m.diagnoses.push_back(out);
  }
  m.diagnosed = true;
  m.snapshot = Get<std::string>(r, "snapshot");  // the reports link it
  if (r.contains("injection") && !r["injection"].is_none()) {
    const py::dict i = r["injection"];
    m.injection = VariantMeasurement::Injection{Get<std::string>(i, "spec"), Get<int64_t>(i, "requests_seen")};
    for (const py::handle h : Get<py::list>(i, "failures")) {
      const py::dict f = py::reinterpret_borrow<py::dict>(h);
      m.injected.push_back({Get<int64_t>(f, "allocation_index"), Get<int64_t>(f, "bytes"), Get<std::string>(f, "phase"),
                            Get<std::string>(f, "policy")});
    }
  }
  return m;
}

ResultCode CodeNamed(const std::string& name) {
  for (ResultCode c : {ResultCode::kPass, ResultCode::kFail, ResultCode::kXFail, ResultCode::kXPass,
                       ResultCode::kUnsupported, ResultCode::kSkipped, ResultCode::kTimeout, ResultCode::kUnresolved}) {
    if (ResultName(c) == name) return c;
  }
  throw std::invalid_argument("oomguard: unknown result code '" + name + "'");
}

BaselineFile LoadBaseline(const std::string& dir, const std::string& scenario, std::string* path) {
  BaselineFile file;
  std::string error;
  *path = BaselinePath(dir, scenario);
  if (!LoadScenarioBaseline(dir, scenario, &file, &error)) throw std::invalid_argument(error);
  return file;
}

}  // namespace

// One test against its baseline: {"verdict", "failures", "metrics", "path"}; a broken file raises ValueError.
py::dict CompareTest(const std::string& dir, const std::string& scenario, const py::dict& record, bool strict) {
  std::string path;
  const BaselineFile file = LoadBaseline(dir, scenario, &path);
  const BaselineComparison c = CompareWithBaseline(file, path, VariantFromRecord(record));
  py::list metrics;
  for (const MetricDiff& d : c.metrics) {
    // "text" as BaselineFailures words a regression: "peak_bytes 7.81 MiB vs baseline 7.03 MiB (+799.61 KiB, +11.1%)".
    const std::string text = d.metric + " " + FormatMetricValue(d.metric, d.current, false) + " vs baseline " +
                             FormatMetricValue(d.metric, d.baseline, false) + " (" +
                             FormatMetricValue(d.metric, d.delta, true) + ", " + FormatPercent(d.delta_percent) + ")";
    metrics.append(py::dict(py::arg("metric") = d.metric, py::arg("baseline") = d.baseline,
                            py::arg("current") = d.current, py::arg("delta") = d.delta,
                            py::arg("delta_percent") = d.delta_percent,
                            py::arg("verdict") = std::string(BaselineVerdictName(d.verdict)), py::arg("text") = text));
  }
  py::dict out;
  out["verdict"] = std::string(BaselineVerdictName(c.verdict));
  out["failures"] = BaselineFailures(c, strict);
  out["metrics"] = metrics;
  out["path"] = path;
  return out;
}

// The run as RunResults: `scenarios` is a list of {"name", "file", "backend", "card", "cap_bytes",
// "duration_ms", "variants": [{"record", "code", "reasons"}]}; compared with `baselines_dir`'s files when
// it is not empty.
RunResults Results(const py::list& scenarios, const py::dict& run) {
  RunResults report;
  const VersionInfo versions = CollectVersionInfo();
  report.oomguard_version = versions.oomguard;
  report.libtorch_version = versions.libtorch;
  report.backend = Get<std::string>(run, "backend");
  report.duration_ms = Get<double>(run, "duration_ms");
  report.strict = Get<bool>(run, "strict");
  report.updating_baselines = Get<bool>(run, "updating_baselines");
  const auto dir = Get<std::string>(run, "baselines_dir");
  report.compared_with_baselines = !dir.empty();
  for (const py::handle sh : scenarios) {
    const py::dict s = py::reinterpret_borrow<py::dict>(sh);
    ScenarioResult& out = report.scenarios.emplace_back();
    out.name = Get<std::string>(s, "name");
    out.file = Get<std::string>(s, "file");
    out.backend = Get<std::string>(s, "backend");
    out.card = Get<std::string>(s, "card");
    out.cap_bytes = std::max<int64_t>(0, Get<int64_t>(s, "cap_bytes"));
    out.duration_ms = Get<double>(s, "duration_ms");
    BaselineFile file;
    std::string path;
    if (!dir.empty()) file = LoadBaseline(dir, out.name, &path);
    for (const py::handle vh : Get<py::list>(s, "variants")) {
      const py::dict v = py::reinterpret_borrow<py::dict>(vh);
      VariantResult& variant = out.variants.emplace_back();
      RecordOutcome(variant, CodeNamed(Get<std::string>(v, "code")));
      variant.reasons = Get<std::vector<std::string>>(v, "reasons");
      variant.diagnostics = Get<std::string>(v, "diagnostics");
      if (v.contains("record") && !v["record"].is_none()) {
        variant.measurement = VariantFromRecord(v["record"]);
        variant.name = variant.measurement->variant;
        if (!dir.empty()) variant.baseline = CompareWithBaseline(file, path, *variant.measurement);
      } else {
        variant.name = Get<std::string>(v, "name");
      }
    }
    RecordScenarioOutcome(out);
  }
  return report;
}

}  // namespace plugin
