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

#include <cstring>
#include <stdexcept>
#include <string>

#include "allocators/install.h"
#include "base/byte_size.h"
#include "oomguard/measure.h"

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

// The innermost Python frame outside them, with its source text: "train.py:41 (total += loss)"; empty
// on a thread that runs no Python (MeasureScope::SetCallerLocation: asked once per outermost operator).
std::string PythonCallerLocation() {
  py::gil_scoped_acquire gil;  // torch's bindings release it around the operator
  try {
    py::object frame = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(PyEval_GetFrame()));
    while (frame && !frame.is_none()) {
      const std::string module = py::str(frame.attr("f_globals").attr("get")("__name__", ""));
      if (!Internal(module)) {
        const std::string file = py::str(frame.attr("f_code").attr("co_filename"));
        const int line = frame.attr("f_lineno").cast<int>();
        const std::string text = py::str(py::module_::import("linecache").attr("getline")(file, line).attr("strip")());
        return file.substr(file.rfind('/') + 1) + ":" + std::to_string(line) + (text.empty() ? "" : " (" + text + ")");
      }
      frame = frame.attr("f_back");
    }
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
      });

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

  py::class_<Measurement>(module, "Measurement")
      .def_readonly("outcome", &Measurement::outcome)
      .def_readonly("error", &Measurement::error)
      .def_readonly("backend", &Measurement::backend)
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
      .def_readonly("warnings", &Measurement::warnings)
      .def_readonly("oom", &Measurement::oom)
      .def_readonly("diagnoses", &Measurement::diagnoses)
      .def("passed", &Measurement::passed)
      .def("ran_out_of_memory", &Measurement::ran_out_of_memory)
      .def("describe", &Measurement::Describe)
      .def("__repr__", &Measurement::Describe);

  // The lock a scope takes may be held by another thread's scope, which needs the GIL to end it.
  py::class_<oomguard::MeasureScope>(module, "MeasureScope")
      .def(py::init([](const std::string& backend, const std::string& card, const std::string& cap) {
             oomguard::MeasureOptions options;
             options.backend = backend;
             options.card = card;
             options.cap = cap;
             auto scope = std::make_unique<oomguard::MeasureScope>(options);
             scope->SetCallerLocation(&PythonCallerLocation);
             return scope;
           }),
           py::arg("backend"), py::arg("card"), py::arg("cap"), py::call_guard<py::gil_scoped_release>())
      .def("set_phase", &oomguard::MeasureScope::SetPhase, py::arg("phase"), py::arg("unwinding") = false)
      .def_property_readonly("phase", &oomguard::MeasureScope::phase)
      .def("iterations", &oomguard::MeasureScope::Iterations, py::arg("requested"))
      .def("begin_iteration", &oomguard::MeasureScope::BeginIteration, py::arg("index"))
      .def("end_iteration", &oomguard::MeasureScope::EndIteration)
      .def("track", &oomguard::MeasureScope::Track, py::arg("parameters"))
      .def("track_optimizer", &oomguard::MeasureScope::TrackOptimizer, py::arg("kind"), py::arg("keeps_state"),
           py::arg("state_bytes"))
      .def_property_readonly("live_bytes", &oomguard::MeasureScope::live_bytes)
      .def("finish", &oomguard::MeasureScope::Finish)
      .def("finish_with_error", &oomguard::MeasureScope::FinishWithError);

  module.def("tracking_allocators_installed", &oomguard::TrackingAllocatorsInstalled);
  module.def("parse_bytes", &oomguard::ParseBytes);
  module.def("card_cap_bytes", &oomguard::CardCapBytes);
  module.def("format_bytes", &oomguard::FormatBytes);  // "1.54 MiB", as PyTorch's OOM message writes sizes
  // The torch whose headers and libraries this module was built with: oomguard/__init__.py refuses another.
  module.attr("built_for_torch") =
      std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." + std::to_string(TORCH_VERSION_PATCH);
}
