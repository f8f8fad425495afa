// oomguard._core: the C++ side of the Python package (python/oomguard/): oomguard::MeasureScope
// (oomguard/measure.h) and its Measurement, bound with pybind11 from torch's own headers (Note [One
// torch in the process], python/CMakeLists.txt). The scope books what the user's own torch calls
// allocate, through the tracking allocator it installs in c10; the only tensors that cross are the
// tracked parameters (torch's own caster, libtorch_python), which the scope holds until it finishes.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/headeronly/version.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "allocators/fault_injection.h"
#include "allocators/install.h"
#include "base/atomic_file.h"
#include "base/byte_size.h"
#include "model/phase.h"
#include "workload/snapshot_recorder.h"
#include "oomguard/measure.h"
// The pytest plugin's block (below): the CLI's baselines and report writers.
#include "allocators/ledger.h"
#include "backends/version_info.h"
#include "baselines/baseline_diff.h"
#include "baselines/baseline_store.h"
#include "baselines/baseline_update.h"
#include "model/run_results.h"
#include "reports/report_format.h"
#include "reports/report_registry.h"
#include "verdict/verdict.h"

namespace py = pybind11;

namespace {

using oomguard::Measurement;

// torch's and oomguard's own frames, and the context managers between them and the user's line.
bool Internal(const std::string& module) {
  for (const char* prefix : {"torch", "oomguard", "contextlib"}) {
    const size_t n = std::strlen(prefix);
    if (module.compare(0, n, prefix) == 0 && (module.size() == n || module[n] == '.')) return true;
  }
  return false;
}

// The code object of the function that runs the measured loop (the caller of m.iterations() or
// m.phase()), or null: a code object, not the frame, which would keep the loop's tensors alive.
PyObject* loop_code = nullptr;

void SetLoopCode(py::object code) {
  Py_XDECREF(loop_code);
  loop_code = code.is_none() ? nullptr : code.release().ptr();
}

// The source line without a trailing comment: "history.append(loss)   # keeps the graph" -> "history.append(loss)".
std::string WithoutComment(const std::string& line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '#') {
      const size_t end = i == 0 ? std::string::npos : line.find_last_not_of(" \t", i - 1);
      return end == std::string::npos ? "" : line.substr(0, end + 1);
    }
  }
  return line;
}

std::string Describe(const py::object& frame) {
  const std::string file = py::str(frame.attr("f_code").attr("co_filename"));
  const int line = frame.attr("f_lineno").cast<int>();
  const std::string text =
      WithoutComment(py::str(py::module_::import("linecache").attr("getline")(file, line).attr("strip")()));
  return file.substr(file.rfind('/') + 1) + ":" + std::to_string(line) + (text.empty() ? "" : " (" + text + ")");
}

// The innermost Python frame outside them, with its source text: "train.py:41 (total += loss)", and
// when that is not the loop's own line, the loop's line it was called from ("model.py:30 (...), called
// from train.py:55 (history.append(model(x).loss))"); empty on a thread that runs no Python
// (MeasureScope::SetCallerLocation: asked once per outermost operator).
std::string PythonCallerLocation() {
  py::gil_scoped_acquire gil;  // torch's bindings release it around the operator
  try {
    py::object frame = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(PyEval_GetFrame()));
    std::string where;
    while (frame && !frame.is_none()) {
      const bool in_loop = loop_code != nullptr && frame.attr("f_code").ptr() == loop_code;
      if (!where.empty()) {
        if (in_loop) return where + ", called from " + Describe(frame);
      } else if (!Internal(py::str(frame.attr("f_globals").attr("get")("__name__", "")))) {
        where = Describe(frame);
        if (in_loop || loop_code == nullptr) return where;
      }
      frame = frame.attr("f_back");
    }
    return where;
  } catch (const py::error_already_set&) {  // a frame without the usual attributes: no place, not a failure
  }
  return "";
}

// The bytes by category, as the result's `breakdown`: None where the run did not measure one.
py::dict Breakdown(const Measurement& m) {
  py::dict out;
  out["parameters"] = m.parameter_bytes;
  out["gradients"] = py::cast(m.gradient_bytes);
  out["optimizer_state"] = py::cast(m.optimizer_state_bytes);
  out["forward_saved"] = py::cast(m.forward_saved_bytes);
  return out;
}

}  // namespace

// ---- The pytest plugin's baselines and reports (oomguard/pytest_plugin.py) ----------------------------
// Note [One implementation of baselines]: the plugin keeps its numbers in the CLI's baseline files
// (baselines/baseline_store.h: same JSON, same tolerance rules, same atomic and locked updates) and
// writes the CLI's reports (reports/report_registry.h), by handing this code the records it made of
// each test (oomguard/report.py, record_of), which cross the forked child's pipe as JSON. A test module
// is a scenario (the file tests.test_models.json), a test a variant ("test_over", "TestX::test_y[2]").
namespace plugin {

using namespace oomguard;

template <typename T>
T Get(const py::dict& d, const char* key, T fallback = T()) {
  return d.contains(key) && !d[key].is_none() ? d[key].cast<T>() : fallback;
}

// The record as the runner's VariantMeasurement, with what baselines and reports read (the inverse of
// ToPublic, run/in_process_measure.h; phases in name order, no timeline).
VariantMeasurement VariantFromRecord(const py::dict& r) {
  VariantMeasurement m;
  m.variant = Get<std::string>(r, "variant");
  m.backend = Get<std::string>(r, "backend");
  m.card = Get<std::string>(r, "card");
  m.kernels = Get<std::string>(r, "kernels", "cpu");  // baselines key card mode's entries apart
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

PYBIND11_MODULE(_core, module) {
  module.doc() = "oomguard's measurement scope (oomguard/measure.h), for oomguard.measure";

  py::class_<Measurement::Oom>(module, "Oom")
      .def_readonly("phase", &Measurement::Oom::phase)
      .def_readonly("requested_bytes", &Measurement::Oom::requested_bytes)
      .def_readonly("live_bytes", &Measurement::Oom::live_bytes)
      .def_readonly("injected", &Measurement::Oom::injected)
      .def_property_readonly("live_by_category", [](const Measurement::Oom& o) {
        py::dict out;
        out["parameters"] = o.parameters_bytes;
        out["gradients"] = o.gradients_bytes;
        out["optimizer_state"] = o.optimizer_state_bytes;
        out["inputs"] = o.inputs_bytes;
        out["activations_and_transient"] = o.activations_and_transient_bytes;
        return out;
      })
      .def("__repr__", &Measurement::Oom::Describe);

  py::class_<Measurement::Injection::Failure>(module, "InjectedFailure")
      .def_readonly("allocation_index", &Measurement::Injection::Failure::allocation_index)
      .def_readonly("bytes", &Measurement::Injection::Failure::bytes)
      .def_readonly("phase", &Measurement::Injection::Failure::phase)
      .def_readonly("policy", &Measurement::Injection::Failure::policy)
      .def("__repr__", [](const Measurement::Injection::Failure& f) {
        return "request #" + std::to_string(f.allocation_index) + " of " + std::to_string(f.bytes) + " bytes in " +
               f.phase + " (" + f.policy + ")";
      });

  py::class_<Measurement::Injection>(module, "Injection")
      .def_readonly("spec", &Measurement::Injection::spec)
      .def_readonly("requests_seen", &Measurement::Injection::requests_seen)
      .def_readonly("failures", &Measurement::Injection::failures);

  py::class_<Measurement::Diagnosis>(module, "Diagnosis")
      .def_readonly("kind", &Measurement::Diagnosis::kind)
      .def_readonly("severity", &Measurement::Diagnosis::severity)
      .def_readonly("bytes", &Measurement::Diagnosis::bytes)
      .def_readonly("per", &Measurement::Diagnosis::per)
      .def_readonly("phase", &Measurement::Diagnosis::phase)
      .def_readonly("where", &Measurement::Diagnosis::where)
      .def_readonly("message", &Measurement::Diagnosis::message)
      .def_readonly("fix", &Measurement::Diagnosis::fix)
      .def_readonly("amount", &Measurement::Diagnosis::amount)
      .def("__repr__", [](const Measurement::Diagnosis& d) { return d.kind + " (" + d.amount + "): " + d.message; });

  using CudaModel = Measurement::CudaModel;
  py::class_<CudaModel>(module, "CudaModel")
      .def_readonly("allocated_peak_bytes", &CudaModel::allocated_peak_bytes)
      .def_readonly("reserved_peak_bytes", &CudaModel::reserved_peak_bytes)
      .def_readonly("requested_peak_bytes", &CudaModel::requested_peak_bytes)
      .def_readonly("segments_peak", &CudaModel::segments_peak)
      .def_readonly("alloc_retries", &CudaModel::alloc_retries)
      .def_readonly("ooms", &CudaModel::ooms)
      .def_readonly("decides", &CudaModel::decides)
      .def_readonly("allocated_at_start_bytes", &CudaModel::allocated_at_start_bytes)
      .def_readonly("reserved_at_start_bytes", &CudaModel::reserved_at_start_bytes)
      .def_property_readonly("fragmentation_bytes", &CudaModel::fragmentation_bytes)
      .def("__repr__", [](const CudaModel& c) {
        return "CudaModel(allocated_peak_bytes=" + std::to_string(c.allocated_peak_bytes) +
               ", reserved_peak_bytes=" + std::to_string(c.reserved_peak_bytes) +
               ", fragmentation_bytes=" + std::to_string(c.fragmentation_bytes()) +
               ", requested_peak_bytes=" + std::to_string(c.requested_peak_bytes) +
               ", segments_peak=" + std::to_string(c.segments_peak) +
               ", alloc_retries=" + std::to_string(c.alloc_retries) + ", ooms=" + std::to_string(c.ooms) +
               ", decides=" + (c.decides ? "True" : "False") +
               ", allocated_at_start_bytes=" + std::to_string(c.allocated_at_start_bytes) +
               ", reserved_at_start_bytes=" + std::to_string(c.reserved_at_start_bytes) + ")";
      });

  py::class_<Measurement>(module, "Measurement")
      .def_readonly("outcome", &Measurement::outcome)
      .def_readonly("error", &Measurement::error)
      .def_readonly("backend", &Measurement::backend)
      .def_readonly("kernels", &Measurement::kernels)
      // Written by oomguard.measure(world=..., rank=...): the core does not see the process group.
      .def_readwrite("world", &Measurement::world)
      .def_readwrite("rank", &Measurement::rank)
      .def_readwrite("process_group", &Measurement::process_group)
      .def_readonly("card", &Measurement::card)
      .def_readonly("cap_bytes", &Measurement::cap_bytes)
      .def_readonly("peak_bytes", &Measurement::peak_bytes)
      .def_readonly("peak_phase", &Measurement::peak_phase)
      .def_readonly("phase_peak_bytes", &Measurement::phase_peak_bytes)
      .def_readonly("live_at_peak_by_phase", &Measurement::live_at_peak_by_phase)
      .def_readonly("alloc_count", &Measurement::alloc_count)
      .def_readonly("live_after_iteration", &Measurement::live_after_iteration_bytes)
      .def_readonly("iteration_peak_bytes", &Measurement::iteration_peak_bytes)
      .def_readonly("live_growth_per_iteration_bytes", &Measurement::live_growth_per_iteration_bytes)
      .def_property_readonly("leak", &Measurement::leaks)
      .def_property_readonly("breakdown", &Breakdown)
      .def_readonly("steady_state", &Measurement::steady_state)
      // Writable: oomguard.measure adds the ops that ran on torch's Python Meta kernels (oomguard/meta_kernels.py).
      .def_readwrite("warnings", &Measurement::warnings)
      .def_readonly("oom", &Measurement::oom)
      .def_readonly("cuda_model", &Measurement::cuda_model)
      // The model's reserved peak, which a card's verdict is on; None without the model (verdict="allocated").
      .def_property_readonly("reserved_peak_bytes",
                             [](const Measurement& m) {
                               return m.cuda_model ? std::optional<int64_t>(m.cuda_model->reserved_peak_bytes)
                                                   : std::nullopt;
                             })
      .def_readonly("diagnoses", &Measurement::diagnoses)
      .def_readonly("injection", &Measurement::injection)
      .def_readonly("snapshot", &Measurement::snapshot)
      .def_readonly("snapshot_error", &Measurement::snapshot_error)
      .def("passed", &Measurement::passed)
      .def("ran_out_of_memory", &Measurement::ran_out_of_memory)
      .def("describe", &Measurement::Describe)
      .def("__repr__", &Measurement::Describe);

  // The lock a scope takes may be held by another thread's scope, which needs the GIL to end it.
  py::class_<oomguard::MeasureScope>(module, "MeasureScope")
      .def(py::init([](const std::string& backend, const std::string& card, const std::string& cap,
                       const std::string& kernels, const std::string& verdict, const std::string& alloc_conf,
                       const std::vector<std::string>& inject, const std::string& snapshot, bool eval_no_grad) {
             oomguard::MeasureOptions options;
             options.backend = backend;
             options.card = card;
             options.cap = cap;
             options.kernels = kernels;
             options.verdict = verdict;
             options.alloc_conf = alloc_conf;
             options.inject = inject;
             options.snapshot = snapshot;
             options.eval_no_grad = eval_no_grad;
             auto scope = std::make_unique<oomguard::MeasureScope>(options);
             scope->SetCallerLocation(&PythonCallerLocation);
             return scope;
           }),
           py::arg("backend"), py::arg("card"), py::arg("cap"), py::arg("kernels") = "", py::arg("verdict") = "",
           py::arg("alloc_conf") = "", py::arg("inject") = std::vector<std::string>(), py::arg("snapshot") = "",
           py::arg("eval_no_grad") = false, py::call_guard<py::gil_scoped_release>())
      .def("set_phase", &oomguard::MeasureScope::SetPhase, py::arg("phase"), py::arg("unwinding") = false)
      .def_property_readonly("phase", &oomguard::MeasureScope::phase)
      .def("iterations", &oomguard::MeasureScope::Iterations, py::arg("requested"))
      .def("begin_iteration", &oomguard::MeasureScope::BeginIteration, py::arg("index"))
      .def("end_iteration", &oomguard::MeasureScope::EndIteration)
      .def("track", &oomguard::MeasureScope::Track, py::arg("parameters"))
      .def("track_gradients", &oomguard::MeasureScope::TrackGradients, py::arg("gradient_bytes"))
      .def("track_optimizer", &oomguard::MeasureScope::TrackOptimizer, py::arg("kind"), py::arg("keeps_state"),
           py::arg("state_bytes"))
      .def_property_readonly("live_bytes", &oomguard::MeasureScope::live_bytes)
      .def("finish", &oomguard::MeasureScope::Finish)
      .def("finish_with_error", &oomguard::MeasureScope::FinishWithError);

  module.def("set_loop_code", &SetLoopCode, py::arg("code"));
  module.def("tracking_allocators_installed", &oomguard::TrackingAllocatorsInstalled);
  module.def("parse_bytes", &oomguard::ParseBytes);
  module.def("card_cap_bytes", &oomguard::CardCapBytes);
  // oomguard.measure's checks of inject= and snapshot= before it runs: the C++ parser's and the CLI's
  // text ("invalid fault spec 'nth=0': nth must be a whole number >= 1, got '0'"), or "" when accepted.
  module.def("inject_spec_error", [](const std::string& spec) {
    std::string error;
    return oomguard::ParseFaultSpec(spec, &error, oomguard::AllNames<oomguard::Phase>()) ? std::string() : error;
  });
  module.def("snapshot_path_error", [](const std::string& path) {
    std::string error;
    return oomguard::CheckWritablePath(path, &error) ? std::string() : error;
  });
  // The plugin's --oomguard-snapshot-dir: DIR/<scenario>.<variant>.<backend>.pickle, as the CLI names them.
  module.def("snapshot_path", &oomguard::SnapshotPath, py::arg("dir"), py::arg("scenario"), py::arg("variant"),
             py::arg("backend"));
  module.def("snapshot_dir_error", [](const std::string& dir) {
    std::string error;
    return oomguard::MakeDirectories(dir, &error) ? std::string() : error;
  });
  module.def("format_bytes", &oomguard::FormatBytes);  // "1.54 MiB", as PyTorch's OOM message writes sizes
  // The torch whose headers and libraries this module was built with: oomguard/__init__.py refuses another.
  module.attr("built_for_torch") =
      std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." + std::to_string(TORCH_VERSION_PATCH);

  // The pytest plugin's block (Note [One implementation of baselines]).
  module.def("compare_with_baseline", &plugin::CompareTest, py::arg("baselines_dir"), py::arg("scenario"),
             py::arg("record"), py::arg("strict"));
  module.def(
      "update_baselines",
      [](const py::list& scenarios, const py::dict& run) {
        std::ostringstream out;
        std::string error;
        const bool written = oomguard::UpdateBaselines(plugin::Results(scenarios, run),
                                                       plugin::Get<std::string>(run, "baselines_dir"), out, &error);
        return py::make_tuple(out.str(), written ? "" : error);
      },
      py::arg("scenarios"), py::arg("run"));
  module.def(
      "write_report",
      [](const std::string& spec, const py::list& scenarios, const py::dict& run) {
        std::string error;
        if (!oomguard::ValidateReportSpec(spec, &error)) throw std::invalid_argument(error);
        if (!oomguard::WriteReport(spec, plugin::Results(scenarios, run), &error)) throw std::runtime_error(error);
      },
      py::arg("spec"), py::arg("scenarios"), py::arg("run"));
  module.def("report_spec_error", [](const std::string& spec) {
    std::string error;
    return oomguard::ValidateReportSpec(spec, &error) ? std::string() : error;
  });
}
