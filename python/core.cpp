// oomguard._core: the C++ side of the Python package (python/oomguard/): oomguard::MeasureScope
// (oomguard/measure.h) and its Measurement, bound with pybind11 from torch's own headers (Note [One
// torch in the process], python/CMakeLists.txt). No tensor crosses this boundary: the scope books
// what the user's own torch calls allocate, through the tracking allocator it installs in c10.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>

#include "allocators/install.h"
#include "oomguard/measure.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, module) {
  module.doc() = "oomguard's measurement scope (oomguard/measure.h), for oomguard.measure";

  py::class_<oomguard::Measurement::Oom>(module, "Oom")
      .def_readonly("phase", &oomguard::Measurement::Oom::phase)
      .def_readonly("requested_bytes", &oomguard::Measurement::Oom::requested_bytes)
      .def_readonly("live_bytes", &oomguard::Measurement::Oom::live_bytes);

  py::class_<oomguard::Measurement>(module, "Measurement")
      .def_readonly("outcome", &oomguard::Measurement::outcome)
      .def_readonly("error", &oomguard::Measurement::error)
      .def_readonly("backend", &oomguard::Measurement::backend)
      .def_readonly("card", &oomguard::Measurement::card)
      .def_readonly("cap_bytes", &oomguard::Measurement::cap_bytes)
      .def_readonly("peak_bytes", &oomguard::Measurement::peak_bytes)
      .def_readonly("peak_phase", &oomguard::Measurement::peak_phase)
      .def_readonly("phase_peak_bytes", &oomguard::Measurement::phase_peak_bytes)
      .def_readonly("live_at_peak_by_phase", &oomguard::Measurement::live_at_peak_by_phase)
      .def_readonly("alloc_count", &oomguard::Measurement::alloc_count)
      .def_readonly("oom", &oomguard::Measurement::oom)
      .def("passed", &oomguard::Measurement::passed)
      .def("ran_out_of_memory", &oomguard::Measurement::ran_out_of_memory)
      .def("describe", &oomguard::Measurement::Describe)
      .def("__repr__", &oomguard::Measurement::Describe);

  // The lock a scope takes may be held by another thread's scope, which needs the GIL to end it.
  py::class_<oomguard::MeasureScope>(module, "MeasureScope")
      .def(py::init([](const std::string& backend, const std::string& card, const std::string& cap) {
             oomguard::MeasureOptions options;
             options.backend = backend;
             options.card = card;
             options.cap = cap;
             return std::make_unique<oomguard::MeasureScope>(options);
           }),
           py::arg("backend"), py::arg("card"), py::arg("cap"), py::call_guard<py::gil_scoped_release>())
      .def("set_phase", &oomguard::MeasureScope::SetPhase)
      .def_property_readonly("phase", &oomguard::MeasureScope::phase)
      .def_property_readonly("live_bytes", &oomguard::MeasureScope::live_bytes)
      .def("finish", &oomguard::MeasureScope::Finish)
      .def("finish_with_error", &oomguard::MeasureScope::FinishWithError);

  module.def("tracking_allocators_installed", &oomguard::TrackingAllocatorsInstalled);
  module.def("parse_bytes", &oomguard::ParseBytes);
  module.def("card_cap_bytes", &oomguard::CardCapBytes);
}
