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
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "allocators/fault_injection.h"
#include "allocators/install.h"
#include "allocators/meta_tracking_allocator.h"
#include "backends/host_scalars.h"
#include "backends/meta/kernel_target.h"
#include "base/atomic_file.h"
#include "base/byte_size.h"
#include "model/phase.h"
#include "nn/autocast/autocast.h"
#include "workload/parallel/fsdp_storage.h"
#include "workload/snapshot_recorder.h"
#include "oomguard/measure.h"
// The pytest plugin's baselines and reports: the CLI's (plugin_records.h).
#include "baselines/baseline_update.h"
#include "python/caller_location.h"
#include "python/plugin_records.h"
#include "reports/report_registry.h"

namespace py = pybind11;

namespace {

using oomguard::Measurement;
using oomguard::python::PythonCallerLocation;
using oomguard::python::SetLoopCode;

// The bytes by category, as the result's `breakdown`: None where the run did not measure one.
// A MetaAutocastScope entered and left from Python's `with`.
struct MetaAutocast {
  explicit MetaAutocast(at::ScalarType dtype) : dtype(dtype) {}
  at::ScalarType dtype;
  std::optional<oomguard::AutocastScope> scope;
};

// Note [Fake tensors are shapes] (python/oomguard/fsdp_on_meta.py): a context manager over
// UncountedMetaScope, for what FakeTensorMode allocates on meta.
struct UncountedMeta {
  std::optional<oomguard::UncountedMetaScope> scope;
};

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

  using CudaAllocator = Measurement::CudaAllocator;
  py::class_<CudaAllocator>(module, "CudaAllocator")
      .def_readonly("allocated_peak_bytes", &CudaAllocator::allocated_peak_bytes)
      .def_readonly("reserved_peak_bytes", &CudaAllocator::reserved_peak_bytes)
      .def_readonly("active_peak_bytes", &CudaAllocator::active_peak_bytes)
      .def_readonly("requested_peak_bytes", &CudaAllocator::requested_peak_bytes)
      .def_readonly("alloc_retries", &CudaAllocator::alloc_retries)
      .def_readonly("ooms", &CudaAllocator::ooms)
      .def_readonly("allocated_at_start_bytes", &CudaAllocator::allocated_at_start_bytes)
      .def_readonly("reserved_at_start_bytes", &CudaAllocator::reserved_at_start_bytes)
      .def_property_readonly("fragmentation_bytes", &CudaAllocator::fragmentation_bytes)
      .def("__repr__", [](const CudaAllocator& c) {
        return "CudaAllocator(allocated_peak_bytes=" + std::to_string(c.allocated_peak_bytes) +
               ", reserved_peak_bytes=" + std::to_string(c.reserved_peak_bytes) +
               ", alloc_retries=" + std::to_string(c.alloc_retries) + ", ooms=" + std::to_string(c.ooms) + ")";
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
      .def_readonly("cuda", &Measurement::cuda)
      // The reserved peak a card's verdict is on: the GPU's own (backend "cuda"), or the model's; None
      // without either (verdict="allocated").
      .def_property_readonly("reserved_peak_bytes",
                             [](const Measurement& m) -> std::optional<int64_t> {
                               if (m.cuda) return m.cuda->reserved_peak_bytes;
                               if (m.cuda_model) return m.cuda_model->reserved_peak_bytes;
                               return std::nullopt;
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

  // Measure.autocast on meta (oomguard/measure.py): torch.autocast refuses device_type "meta" and casts
  // no meta tensor for "cpu" or "cuda", so meta's own autocast (nn/autocast/meta_autocast.h), by the cpu's table
  // or, inside a measurement with kernels="cuda", CUDA's (Note [AutocastCUDA on meta]). A context manager.
  py::class_<MetaAutocast>(module, "MetaAutocast")
      .def(py::init([](const std::string& dtype) {
             if (dtype != "bfloat16" && dtype != "float16")
               throw std::invalid_argument("autocast on meta: dtype " + dtype + " is not bfloat16 or float16");
             return std::make_unique<MetaAutocast>(dtype == "float16" ? at::kHalf : at::kBFloat16);
           }),
           py::arg("dtype"))
      .def("__enter__",
           [](MetaAutocast& a) {
             if (a.scope) throw std::runtime_error("autocast on meta: already entered");
             a.scope.emplace(oomguard::AutocastSetting{
                 c10::kMeta, a.dtype, oomguard::CurrentKernelTarget().cuda() ? c10::kCUDA : c10::kCPU});
             return c10::DeviceTypeName(oomguard::MetaAutocastMirrors(), /*lower_case=*/true);
           })
      .def("__exit__", [](MetaAutocast& a, const py::args&) { a.scope.reset(); });

  py::class_<UncountedMeta>(module, "UncountedMeta")
      .def(py::init<>())
      .def("__enter__", [](UncountedMeta& u) { u.scope.emplace(); })
      .def("__exit__", [](UncountedMeta& u, const py::args&) { u.scope.reset(); });

  module.def("set_loop_code", &SetLoopCode, py::arg("code"));
  // The measurement's torch.optim step hooks: Note [The Python optimizer's step counts].
  module.def("set_in_python_optimizer_step", &oomguard::SetInPythonOptimizerStep, py::arg("in_step"));
  module.def("set_python_caller_thread", &oomguard::SetPythonCallerThread, py::arg("on"));
  module.def("tracking_allocators_installed", &oomguard::TrackingAllocatorsInstalled);
  // Note [Resizing a storage on meta] (workload/parallel/fsdp_storage.h): FSDP2's alloc_storage and
  // free_storage on meta (python/oomguard/fsdp_on_meta.py).
  module.def(
      "resize_storage_bytes",
      [](const at::Tensor& tensor, int64_t nbytes) {
        if (nbytes < 0) throw py::value_error("resize_storage_bytes: nbytes must be >= 0");
        oomguard::ResizeStorageBytes(tensor, static_cast<size_t>(nbytes));
      },
      py::arg("tensor"), py::arg("nbytes"));
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
