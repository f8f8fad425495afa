// Runs one scenario variant's training loop on a backend, under the allocator limits, and measures it.
//
//   oomguard::VariantMeasureOptions options{oomguard::Backend::kCpu, limits, /*iterations=*/0};
//   oomguard::VariantMeasurement m = oomguard::MeasureVariant(variant_spec, options);
//   m.outcome;  // "pass", "oom" or "error:<category>"; the numbers measured until then are kept
//
// Error policy: training failures (an OOM at the cap, an injected fault, autograd and kernel errors:
// LibTorch's c10::Error, and the host's std::bad_alloc) are the measurement, not exceptions:
// MeasureVariant catches them here, and only here, into outcome/error (Note [What a variant catches]).
// A harness bug aborts (OOMGUARD_CHECK). Each call installs limits on the process-wide accounts and
// resets their statistics, so calls must be serialised; the runner gives each variant a process of
// its own, and `oomguard fit` runs trials one after another in one process, checking for leaks.
//
// A variant naming a workload (spec.workload) runs the function registered under that name
// (oomguard/workload.h, workload/user_workload_run.h) in place of the loop below; everything around
// it is the same.
//
// The net comes from the source spec.model.source names (nn/net_sources.h). The pitfall knobs that act
// between segments (checkpoint.segments, inplace.target, retain_grad, keep_intermediates) need a source
// that offers segments; on one that does not, the variant ends before its first iteration with outcome
// "error:error" and an error naming the knob (workload/loop/segment_knobs.h).
#pragma once

#include <string>

#include "allocators/caching_allocator_config.h"
#include "allocators/device_account.h"
#include "backends/meta/kernel_target.h"
#include "model/backend.h"
#include "model/measurement.h"
#include "model/scenario.h"
#include "oomguard/workload.h"
#include "workload/snapshot_recorder.h"

namespace oomguard {

enum class ModelCuda { kOff, kPredict, kVerdict };

struct VariantMeasureOptions {
  Backend backend = Backend::kCpu;
  Limits limits = {};
  int64_t iterations = 0;  // 0: the variant's own loop.iterations
  size_t timeline_points = 2000;
  SnapshotOptions snapshot = {};  // path set: record the allocation history, write it for a failure
  // cpu/meta: feed a CachingAllocatorModel with every allocation (m.cuda_model); ignored on cuda.
  // kVerdict: a request the model refuses is an OOM, as on a GPU whose cap limits reserved bytes
  // (Note [One decision point], allocators/device_account.h); kPredict: the ledger's cap decides.
  ModelCuda model_cuda = ModelCuda::kOff;
  CachingAllocatorConfig alloc_conf = {};  // the model's PYTORCH_ALLOC_CONF settings
  // meta: whose kernels the Meta kernels mirror for this measurement (Note [Meta as a card]); the
  // session sets it while it runs. Ignored on cpu and cuda, whose kernels are their own.
  KernelTarget kernels = {};
  std::string kernels_warning = {};  // meta: how the target was chosen, when a reader should know (m.warnings)
  // Watch the run for the catalog's pitfalls (diagnose/detectors.h): m.diagnoses, m.diagnosed.
  bool diagnose = true;
  // How (Note [Screen, then watch], diagnose/run_observer.h): kByBackend screens first on meta, where
  // watching every operator would cost as much as the step, and runs again, watched, only when the
  // screen finds a cause; it watches at once on cpu and cuda, where kernels dwarf the watch, and with
  // injected faults. Each way gives the same diagnoses.
  enum class Watching { kByBackend, kAtOnce, kScreenFirst };
  Watching watching = Watching::kByBackend;
  // A registered workload's eval phases run under no_grad, whatever its code does: how the fix of
  // eval-keeps-graph is measured for a workload (run/measured_fix.h). The catalog's loop has its knob.
  bool eval_no_grad = false;
};

// spec.workload empty: the catalog's loop over spec.model's layers; else the registered workload of
// that name (none registered: outcome error:error and m.input_error saying so).
VariantMeasurement MeasureVariant(const VariantSpec& spec, const VariantMeasureOptions& options);

// `function` as a workload's, with spec's knobs, seed and loop.iterations (oomguard::Measure's way in).
VariantMeasurement MeasureWorkload(const WorkloadFunction& function, const VariantSpec& spec,
                                   const VariantMeasureOptions& options);

}  // namespace oomguard
