#include "workload/workload.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "allocators/cuda_model_feed.h"
#include "allocators/install.h"
#include "backends/backend.h"
#include "backends/host_scalars.h"
#include "base/host_memory.h"
#include "diagnose/detectors.h"
#include "diagnose/run_observer.h"
#include "nn/layer_trace.h"
#include "nn/torchscript/torchscript_net.h"
#include "workload/error_category.h"
#include "workload/measured_run.h"
#include "workload/measurement_session.h"
#include "workload/transfer_counter.h"
#include "workload/user_workload_run.h"
#include "workload/loop/variant_run.h"
#include "workload/workload_registry.h"
// The closed sets and the layer-kind table (model/).
#include "base/check.h"
#include "model/layer_kinds.h"
#include "model/outcome.h"
#include "model/phase.h"

namespace oomguard {
namespace {

// "math", "flash", "math+flash" when layers differ, "none" without attention.
std::string AttentionImplementations(const ModelSpec& model) {
  std::string out;
  for (const LayerSpec& layer : model.layers) {
    if (!LayerKindOf(layer).attention_like) continue;
    if (out.find(layer.attention) == std::string::npos) out += (out.empty() ? "" : "+") + layer.attention;
  }
  return out.empty() ? "none" : out;
}

// What the run of a variant is: the catalog's loop over its layers, or a workload's function.
using MakeRun =
    std::function<std::unique_ptr<MeasuredRun>(const BackendSession&, LayerTrace*, RunObserver*, VariantMeasurement*)>;

using Observed = MeasurementSession::Observed;

VariantMeasurement MeasureOnce(const VariantSpec& spec, const VariantMeasureOptions& options, const MakeRun& make_run,
                               RunObserver::Mode mode, Observed* observed) {
  VariantMeasurement m;
  m.attention = AttentionImplementations(spec.model);
  const auto start = std::chrono::steady_clock::now();
  {
    MeasurementSession session(spec, options, mode, &m);
    const std::unique_ptr<MeasuredRun> run = make_run(session.backend(), session.trace(), session.observer(), &m);
    // Note [What a variant catches]: the failures scenarios are about, and nothing else. LibTorch's
    // errors (c10::Error: out of memory, autograd's checks, kernels' argument checks, a missing Meta
    // kernel) and the host running out of memory become the outcome; anything else is a harness bug
    // and ends the child, which the parent reports as UNRESOLVED with its stderr. Harness invariants
    // use OOMGUARD_CHECK, which aborts, so they can never pass for an expected `error:error`.
    try {
      run->Run();
    } catch (const c10::Error& e) {
      session.RecordFailure(e, run.get());
    } catch (const std::bad_alloc& e) {
      session.RecordFailure(e, run.get());
    } catch (const std::runtime_error& e) {
      if (!IsScriptInterpreterError(e)) throw;  // not a training step's failure: a harness bug
      session.RecordFailure(e, run.get());
    }
    *observed = session.Finish();
  }
  m.duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return m;
}

bool ScreensFirst(const VariantMeasureOptions& options) {
  switch (options.watching) {
    case VariantMeasureOptions::Watching::kAtOnce:
      return false;
    case VariantMeasureOptions::Watching::kScreenFirst:
      return true;
    case VariantMeasureOptions::Watching::kByBackend:
      // Without data an operator is its dispatch alone; a second run could not replay injected faults.
      return !TraitsOf(options.backend).has_data && !options.limits.faults;
  }
  return false;
}

// What a screened run shows itself that a watch would explain (Note [Screen, then watch]).
std::string SuspicionOf(const VariantMeasurement& m) {
  if (m.outcome.kind == Outcome::kError &&
      (m.outcome.category == ErrorCategory::kInplaceSavedTensor || m.outcome.category == ErrorCategory::kInplaceLeaf)) {
    return "inplace";
  }
  const std::optional<double> growth = LiveGrowthPerIteration(m);
  if (growth && *growth > 0) return "growth";
  return "";
}

// Note [Screen, then watch]: a screened run that gives a cause runs again, watched, for the observations;
// the measurement stays the first run's (on cuda a second run would meet a warm caching allocator), and
// its duration counts both. The watched run repeats the first exactly (the same seed and timeline, so the
// same event indices) but records no snapshot.
VariantMeasurement Measure(const VariantSpec& spec, const VariantMeasureOptions& options, const MakeRun& make_run) {
  const bool screen = options.diagnose && ScreensFirst(options);
  Observed observed;
  VariantMeasurement m =
      MeasureOnce(spec, options, make_run, screen ? RunObserver::Mode::kScreen : RunObserver::Mode::kWatch, &observed);
  if (!options.diagnose) return m;
  if (screen) {
    m.screen.emplace();
    m.screen->cause = !observed.suspicion.empty() ? observed.suspicion : SuspicionOf(m);
  }
  if (screen && !m.screen->cause.empty()) {
    VariantMeasureOptions again = options;
    again.snapshot = {};
    if (again.model_cuda == ModelCuda::kPredict) again.model_cuda = ModelCuda::kOff;  // the verdict stays
    Observed watched;
    const VariantMeasurement second = MeasureOnce(spec, again, make_run, RunObserver::Mode::kWatch, &watched);
    observed.seen = std::move(watched.seen);
    m.screen->watch_ms = second.duration_ms;
    m.duration_ms += second.duration_ms;
  }
  m.diagnoses = Diagnose(m, observed.seen, observed.transfers);
  m.diagnosed = true;
  return m;
}

}  // namespace

VariantMeasurement MeasureVariant(const VariantSpec& spec, const VariantMeasureOptions& options) {
  if (spec.workload.empty()) {
    return Measure(spec, options,
                   [&](const BackendSession& backend, LayerTrace* trace, RunObserver* observer, VariantMeasurement* m) {
                     return MakeVariantRun(spec, options, backend, trace, observer, m);
                   });
  }
  const WorkloadFunction* function = FindWorkload(spec.workload);
  if (function == nullptr) {
    Scenario one;
    one.variants = {spec};
    VariantMeasurement m;
    m.variant = spec.name;
    m.backend = Name(options.backend);
    m.outcome = VariantOutcome::Error(ErrorCategory::kError);
    const bool registered = WorkloadsRegistered(one, &m.input_error);
    OOMGUARD_CHECK(!registered) << "FindWorkload and WorkloadsRegistered disagree on '" << spec.workload << "'";
    m.error = m.input_error;
    return m;
  }
  return MeasureWorkload(*function, spec, options);
}

VariantMeasurement MeasureWorkload(const WorkloadFunction& function, const VariantSpec& spec,
                                   const VariantMeasureOptions& options) {
  return Measure(spec, options,
                 [&](const BackendSession& backend, LayerTrace*, RunObserver* observer, VariantMeasurement* m) {
                   return std::make_unique<UserWorkloadRun>(function, spec, options, backend, observer, m);
                 });
}

}  // namespace oomguard
