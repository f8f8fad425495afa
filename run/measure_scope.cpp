// oomguard::MeasureScope (oomguard/measure.h): a measurement as a scope, over the session MeasureOnce
// runs a workload in and the state a registered workload's Context keeps.
#include <c10/util/Exception.h>

#include <algorithm>
#include <optional>
#include <string>
#include <stdexcept>
#include <utility>

#include "allocators/allocation_trace.h"
#include "allocators/install.h"
#include "backends/backend.h"
#include "base/check.h"
#include "base/did_you_mean.h"
#include "diagnose/detectors.h"
#include "model/phase.h"
#include "oomguard/measure.h"
#include "run/in_process_measure.h"
#include "workload/context/context_state.h"
#include "workload/measured_run.h"
#include "workload/measurement_session.h"
#include "workload/loop/steady_state.h"

namespace oomguard {
namespace {

// What RecordFailure asks of a run: the live bytes by category when the allocation was refused.
class ScopeRun final : public MeasuredRun {
 public:
  explicit ScopeRun(const Context::State& state) : state_(state) {}
  void Run() override { OOMGUARD_CHECK(false) << "a MeasureScope's code is the caller's: nothing to run"; }
  LiveBreakdown Breakdown(int64_t live_at_refusal) const override { return state_.Breakdown(live_at_refusal); }

 private:
  const Context::State& state_;
};

}  // namespace

// Note [The caller's line in a scope's snapshot]: with options.snapshot, the trace labels each event
// with the caller's line ("train.py:41 (total += loss)") as a C++ workload's are labelled with their
// layer: the line SetCallerLocation's function gives the detectors, asked once per outermost operator
// anyway, so the snapshot costs no more Python. An allocation no operator makes keeps the last line.
//
// Note [A scope's session]: the same MeasurementSession MeasureOnce runs a workload in (the limits, the
// ledger's reset, the transfer counter, the backend's own numbers), and the same Context::State a
// registered workload's run keeps (phases, iterations, tracked parameters and optimizer), so that a
// Python loop's numbers and diagnoses are a C++ workload's. The detectors watch every operator from the
// start (RunObserver::Mode::kWatch): a scope cannot be run again after a screen (Note [Screen, then
// watch]). On cpu and meta the tracking allocators are installed (InstallTrackingAllocators) when the
// scope begins, if they were not.
struct MeasureScope::State {
  explicit State(const MeasureOptions& options) : harness(HarnessOptions(options)), lock(MeasureMutex()) {
    spec.name = "measure";
    InstallTrackingAllocators();
    session.emplace(spec, harness, RunObserver::Mode::kWatch, &m);
    context.emplace(spec, harness, session->backend(), session->observer(), m);
  }

  Measurement End() {
    OOMGUARD_CHECK(session) << "MeasureScope finished twice";
    if (!context->iterations_called) {
      context->EndWithoutIterations("the measured code", "the measured code", "m.iterations(n)");
    }
    context.reset();  // the tracked parameters and optimizer: the caller's again
    if (RunObserver* observer = session->observer()) observer->SetCallerLocation(nullptr);
    const MeasurementSession::Observed observed = session->Finish();
    session.reset();  // the limits go
    m.diagnoses = Diagnose(m, observed.seen, observed.transfers);
    m.diagnosed = true;
    return ToPublic(m);
  }

  VariantMeasureOptions harness;
  VariantSpec spec;
  std::unique_lock<std::mutex> lock;  // Note [What an in-process measurement resets]
  VariantMeasurement m;
  std::optional<MeasurementSession> session;
  std::optional<Context::State> context;
  struct NamedOptimizer {
    std::string kind;
    bool keeps_state;
  };
  std::optional<NamedOptimizer> tracked_optimizer;  // TrackOptimizer's, for Iterations()
};

MeasureScope::MeasureScope(const MeasureOptions& options) : state_(std::make_unique<State>(options)) {}

MeasureScope::~MeasureScope() {
  if (state_->session) state_->End();
}

void MeasureScope::SetPhase(const std::string& phase, bool unwinding) {
  Phase parsed;
  if (!Parse(phase, &parsed)) {
    throw std::invalid_argument("oomguard::MeasureScope: phase '" + phase + "' is not one of " +
                                JoinNames(AllNames<Phase>(), ", "));
  }
  OOMGUARD_CHECK(state_->session) << "MeasureScope::SetPhase after Finish";
  state_->context->SwitchPhase(parsed, unwinding);
}

std::string MeasureScope::phase() const {
  return state_->session ? std::string(state_->session->backend().account().ledger().phase()) : "";
}

int64_t MeasureScope::Iterations(int64_t requested) {
  OOMGUARD_CHECK(state_->session) << "MeasureScope::Iterations after Finish";
  Context::State& context = *state_->context;
  if (requested < 1) {
    throw std::invalid_argument("oomguard::MeasureScope: iterations(" + std::to_string(requested) +
                                "): the count must be at least 1");
  }
  if (context.iterations_called) {
    throw std::invalid_argument("oomguard::MeasureScope: iterations() is called once per measurement: loop over it once");
  }
  context.iterations_called = true;
  const auto& tracked = state_->tracked_optimizer;
  const StepThatRepeats steady = tracked ? StepThatRepeatsForNamedOptimizer(tracked->kind, tracked->keeps_state, requested)
                                         : StepThatRepeatsForWorkload(nullptr, requested);
  context.iterations = steady.iterations;
  context.m.steady_state = steady.note;
  context.m.iterations_raised = steady.raised();
  return context.iterations;
}

void MeasureScope::BeginIteration(int64_t index) {
  Context::State& context = *state_->context;
  if (!context.iterations_called || index < 1 || index > context.iterations) {
    throw std::invalid_argument("oomguard::MeasureScope: iteration " + std::to_string(index) +
                                " outside Iterations()' 1.." + std::to_string(context.iterations));
  }
  context.BeginIteration(index);
}

void MeasureScope::EndIteration() { state_->context->EndIteration(); }

void MeasureScope::Track(const std::vector<at::Tensor>& parameters) {
  for (const at::Tensor& p : parameters) {
    state_->context->parameters.push_back(p);
    state_->m.param_bytes += TensorBytes(p);
  }
}

void MeasureScope::TrackGradients(std::function<int64_t()> gradient_bytes) {
  state_->context->gradient_reader = std::move(gradient_bytes);
}

void MeasureScope::TrackOptimizer(const std::string& kind, bool keeps_state,
                                  std::function<std::optional<int64_t>()> state_bytes) {
  state_->context->optimizer_state_reader = std::move(state_bytes);
  state_->tracked_optimizer = State::NamedOptimizer{kind, keeps_state};
}

void MeasureScope::SetCallerLocation(std::function<std::string()> where) {
  OOMGUARD_CHECK(state_->session) << "MeasureScope::SetCallerLocation after Finish";
  RunObserver* observer = state_->session->observer();
  if (observer == nullptr) return;
  AllocationTrace& trace = state_->session->backend().account().trace();
  if (where && trace.enabled()) {  // Note [The caller's line in a scope's snapshot]
    where = [where = std::move(where), &trace] {
      std::string here = where();
      trace.SetLocation(here);
      return here;
    };
  }
  observer->SetCallerLocation(std::move(where));
}

int64_t MeasureScope::live_bytes() const {
  return GetBackend(state_->harness.backend).account().ledger().live_bytes();
}

Measurement MeasureScope::Finish() { return state_->End(); }

Measurement MeasureScope::FinishWithError(const std::string& what) {
  OOMGUARD_CHECK(state_->session) << "MeasureScope finished twice";
  const ScopeRun run(*state_->context);
  // The exception itself is the caller's (a Python one); the account knows whether it refused a request.
  if (state_->session->backend().account().ledger().Snapshot().failed_count > 0) {
    state_->session->RecordFailure(c10::OutOfMemoryError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, what),
                                   &run);
  } else {
    state_->session->RecordFailure(std::runtime_error(what), &run);
  }
  return state_->End();
}

}  // namespace oomguard
