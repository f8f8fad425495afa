#include "workload/user_workload_run.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>

#include <exception>
#include <optional>
#include <set>

#include "allocators/cpu_tracking_allocator.h"
#include "allocators/meta_tracking_allocator.h"
#include "base/byte_size.h"
#include "base/check.h"
#include "base/did_you_mean.h"
#include "model/knobs.h"
#include "model/phase.h"
#include "nn/autocast.h"
#include "workload/grad_digest.h"
#include "workload/optimizer.h"
#include "workload/steady_state.h"

namespace oomguard {
namespace {

int64_t Bytes(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

}  // namespace

// The harness's side of a Context: the run's settings, the phase and iteration bookkeeping, and
// what the function told it to track.
struct Context::State {
  State(const VariantSpec& spec, const VariantMeasureOptions& options, const BackendSession& backend,
        RunObserver* observer, VariantMeasurement& m)
      : spec(spec),
        backend(backend),
        ledger(backend.account().ledger()),
        observer(observer),
        m(m),
        iterations(options.iterations > 0 ? options.iterations : spec.loop.iterations),
        eval_no_grad(options.eval_no_grad) {}

  const VariantSpec& spec;
  const BackendSession& backend;
  Ledger& ledger;
  RunObserver* observer;  // may be null
  VariantMeasurement& m;
  int64_t iterations;  // asked for; ctx.Iterations() may raise it (Note [The step that repeats])
  const bool eval_no_grad;
  std::optional<bool> grad_mode_before_eval;  // eval_no_grad: what an eval phase switched off

  oomguard::Phase phase = oomguard::Phase::kSetup;
  int64_t iteration = 0;  // the one running: 1..iterations; 0 before the loop (or without one)
  bool iterations_called = false;
  IterationMeasurement current;
  int64_t phase_start_live = 0;
  int64_t inputs_bytes = 0;  // ToDevice copies of the running iteration
  bool warned_host_batch_on_meta = false;

  std::vector<at::Tensor> parameters;
  torch::optim::Optimizer* optimizer = nullptr;
  std::optional<int64_t> optimizer_phase_growth;  // what the first optimizer phase left live
  std::map<std::string, std::string> knobs_read;  // name -> the type it was read as

  bool first() const { return iteration <= 1; }

  void SwitchPhase(oomguard::Phase next, bool unwinding) {
    if (!unwinding) EndPhase();
    if (eval_no_grad) ForceNoGradInEval(next);
    phase = next;
    phase_start_live = ledger.live_bytes();
    ledger.SetPhase(Name(next));
  }

  void ForceNoGradInEval(oomguard::Phase next) {
    if (next == oomguard::Phase::kEval && !grad_mode_before_eval) {
      grad_mode_before_eval = c10::GradMode::is_enabled();
      c10::GradMode::set_enabled(false);
    } else if (next != oomguard::Phase::kEval && grad_mode_before_eval) {
      c10::GradMode::set_enabled(*grad_mode_before_eval);
      grad_mode_before_eval.reset();
    }
  }

  // Note [A workload's numbers], user_workload_run.h.
  void EndPhase() {
    const int64_t live = ledger.live_bytes();
    if (phase == oomguard::Phase::kForward && first() && !m.forward_saved_bytes)
      m.forward_saved_bytes = live - phase_start_live;
    if (phase == oomguard::Phase::kBackward) {
      current.live_after_backward_bytes = live;
      if (first() && !m.grad_bytes) TakeGradients();
      if (observer) observer->BackwardDone();
    }
    if (phase == oomguard::Phase::kEval && observer) observer->EvalDone();
    if (phase == oomguard::Phase::kOptimizer && first() && !optimizer_phase_growth) {
      optimizer_phase_growth = live - phase_start_live;
      // The tracked optimizer is alive here, as it may not be when a function without
      // ctx.Iterations() returns: its state is read now, not guessed from the phase's growth.
      if (optimizer) m.optimizer_state_bytes = OptimizerStateBytes(*optimizer);
    }
  }

  void TakeGradients() {
    if (parameters.empty()) return;
    std::vector<at::Tensor> grads;
    int64_t bytes = 0;
    for (const at::Tensor& p : parameters) {
      grads.push_back(p.grad());
      bytes += Bytes(p.grad());
    }
    m.grad_bytes = bytes;
    m.grad_digest = GradDigest(grads, backend.traits().has_data);
  }

  void BeginIteration(int64_t index) {
    // Setup ends where the loop begins: what the loop does outside marked phases is "step".
    if (phase == oomguard::Phase::kSetup) SwitchPhase(oomguard::Phase::kStep, /*unwinding=*/false);
    iteration = index;
    current = {};
    inputs_bytes = 0;
    ledger.TakeWindowPeak();
    if (observer) observer->BeginIteration(index);
  }

  void EndIteration() {
    EndPhase();
    phase_start_live = ledger.live_bytes();
    if (first()) {
      if (!m.grad_bytes) TakeGradients();
      TakeOptimizerState();
    }
    current.live_after_bytes = ledger.live_bytes();
    current.peak_bytes = ledger.TakeWindowPeak();
    m.iterations.push_back(current);  // only completed iterations count
    inputs_bytes = 0;
    if (observer) observer->EndIteration();
  }

  void TakeOptimizerState() {
    if (m.optimizer_state_bytes) return;
    std::optional<int64_t> from_state = optimizer ? OptimizerStateBytes(*optimizer) : std::nullopt;
    if (from_state) {
      m.optimizer_state_bytes = from_state;
    } else if (optimizer_phase_growth) {
      m.optimizer_state_bytes = optimizer_phase_growth;
    }
  }

  // The knob, checked against the type asked for: nullptr when the variant does not set it.
  const KnobValue* Knob(const std::string& name, const std::string& type) {
    knobs_read.emplace(name, type);
    auto it = spec.knobs.find(name);
    return it == spec.knobs.end() ? nullptr : &it->second;
  }

  [[noreturn]] void Missing(const std::string& name, const std::string& type) const {
    std::vector<std::string> unread;  // a misspelling of this knob would be one of them
    for (const auto& [set, value] : spec.knobs) {
      if (knobs_read.count(set) == 0) unread.push_back(set);
    }
    const std::string near = ClosestMatch(name, unread);
    throw WorkloadError("workload '" + spec.workload + "' reads knob \"" + name + "\" (" + type + "), which variant '" +
                        spec.name + "' does not set" +
                        (near.empty() ? ": add it under \"knobs\", e.g. \"knobs\": {\"" + name + "\": ...}"
                                      : "; it sets \"" + near + "\": did you mean \"" + name + "\"?"));
  }

  [[noreturn]] void WrongType(const std::string& name, const std::string& type, const KnobValue& value) const {
    throw WorkloadError("knob \"" + name + "\" is read as " + type + " by workload '" + spec.workload +
                        "', but variant '" + spec.name + "' sets it to " + FormatKnob(value) + " (" +
                        KnobTypeName(value) + ")");
  }

  // After the function completed: every knob the variant sets was read.
  void CheckEveryKnobRead() const {
    std::vector<std::string> read;
    for (const auto& [name, type] : knobs_read) read.push_back(name);
    for (const auto& [name, value] : spec.knobs) {
      if (knobs_read.count(name) != 0) continue;
      const std::string near = ClosestMatch(name, read);
      throw WorkloadError("variant '" + spec.name + "' sets knob \"" + name + "\", which workload '" + spec.workload +
                          "' never reads" + (near.empty() ? "" : "; did you mean \"" + near + "\"?") +
                          (read.empty() ? " (it reads no knobs)" : " (it reads: " + JoinNames(read, ", ") + ")"));
    }
  }
};

// --- Context, the function's side ---

at::TensorOptions Context::options() const { return at::TensorOptions().device(device()).dtype(at::kFloat); }
at::Device Context::device() const { return state_->backend.device(); }
at::TensorOptions Context::host_options() const {
  return at::TensorOptions().device(has_data() ? at::Device(at::kCPU) : device()).dtype(at::kFloat);
}
std::string Context::backend() const { return std::string(Name(state_->backend.backend())); }
bool Context::has_data() const { return state_->backend.traits().has_data; }
int64_t Context::seed() const { return state_->spec.seed; }

namespace {

// The knob readers: one shape for every type. `accept` maps a value to T, or nullopt for another type.
template <typename T, typename Accept>
T ReadKnob(Context::State& state, const std::string& name, const std::string& type, const std::optional<T>& fallback,
           Accept accept) {
  const KnobValue* value = state.Knob(name, type);
  if (value == nullptr) {
    if (fallback) return *fallback;
    state.Missing(name, type);
  }
  std::optional<T> v = accept(*value);
  if (!v) state.WrongType(name, type, *value);
  return *v;
}

std::optional<int64_t> AsInt(const KnobValue& v) {
  if (const int64_t* i = std::get_if<int64_t>(&v)) return *i;
  return std::nullopt;
}
std::optional<double> AsNumber(const KnobValue& v) {
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const double* d = std::get_if<double>(&v)) return *d;
  return std::nullopt;
}
std::optional<bool> AsBool(const KnobValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b;
  return std::nullopt;
}
std::optional<std::string> AsString(const KnobValue& v) {
  if (const std::string* s = std::get_if<std::string>(&v)) return *s;
  return std::nullopt;
}

}  // namespace

int64_t Context::Int(const std::string& name) const {
  return ReadKnob<int64_t>(*state_, name, "an integer", {}, AsInt);
}
int64_t Context::Int(const std::string& name, int64_t fallback) const {
  return ReadKnob<int64_t>(*state_, name, "an integer", fallback, AsInt);
}
double Context::Number(const std::string& name) const {
  return ReadKnob<double>(*state_, name, "a number", {}, AsNumber);
}
double Context::Number(const std::string& name, double fallback) const {
  return ReadKnob<double>(*state_, name, "a number", fallback, AsNumber);
}
bool Context::Bool(const std::string& name) const { return ReadKnob<bool>(*state_, name, "a boolean", {}, AsBool); }
bool Context::Bool(const std::string& name, bool fallback) const {
  return ReadKnob<bool>(*state_, name, "a boolean", fallback, AsBool);
}
std::string Context::String(const std::string& name) const {
  return ReadKnob<std::string>(*state_, name, "a string", {}, AsString);
}
std::string Context::String(const std::string& name, const std::string& fallback) const {
  return ReadKnob<std::string>(*state_, name, "a string", fallback, AsString);
}

namespace {

Phase ParsePhase(std::string_view name) {
  Phase phase;
  if (Parse(name, &phase)) return phase;
  const std::vector<std::string> names = AllNames<Phase>();
  const std::string near = ClosestMatch(std::string(name), names);
  throw WorkloadError("unknown phase \"" + std::string(name) + "\"" +
                      (near.empty() ? "" : "; did you mean \"" + near + "\"?") + " (phases: " + JoinNames(names, ", ") +
                      ")");
}

}  // namespace

Context::PhaseGuard Context::Phase(std::string_view name) {
  const oomguard::Phase next = ParsePhase(name);
  const int previous = static_cast<int>(state_->phase);
  state_->SwitchPhase(next, /*unwinding=*/false);
  return PhaseGuard(state_, previous);
}

Context::PhaseGuard::~PhaseGuard() {
  // While an exception unwinds the step, the phase goes back but nothing is measured from the debris.
  state_->SwitchPhase(static_cast<oomguard::Phase>(previous_), /*unwinding=*/std::uncaught_exceptions() > 0);
}

void Context::SetPhase(std::string_view name) { state_->SwitchPhase(ParsePhase(name), /*unwinding=*/false); }

Context::IterationRange Context::Iterations() {
  if (state_->iterations_called) throw WorkloadError("ctx.Iterations() is called once per run: loop over it once");
  state_->iterations_called = true;
  const StepThatRepeats steady = StepThatRepeatsForWorkload(state_->optimizer, state_->iterations);
  state_->iterations = steady.iterations;
  state_->m.steady_state = steady.note;
  state_->m.iterations_raised = steady.raised();
  return IterationRange(state_, state_->iterations);
}

Context::IterationRange::iterator Context::IterationRange::begin() {
  if (count_ >= 1) state_->BeginIteration(1);
  return iterator(state_, 1);
}

Context::IterationRange::iterator& Context::IterationRange::iterator::operator++() {
  state_->EndIteration();
  ++index_;
  if (index_ <= state_->iterations) state_->BeginIteration(index_);
  return *this;
}

void Context::Track(const std::vector<at::Tensor>& parameters) {
  for (const at::Tensor& p : parameters) {
    state_->parameters.push_back(p);
    state_->m.param_bytes += Bytes(p);
  }
}

void Context::Track(torch::optim::Optimizer& optimizer) { state_->optimizer = &optimizer; }

void Context::CheckMovable(const std::vector<at::Tensor>& parameters) const {
  if (backend() != Name(Backend::kMeta)) return;
  for (const at::Tensor& p : parameters) {
    if (p.is_meta()) continue;
    throw WorkloadError(
        "ctx.Build: LibTorch cannot move a module's parameters to meta (Module::to(kMeta) fails in "
        "set_data); make them on meta (register_parameter(\"w\", torch::empty(sizes, "
        "ctx.options()))) or run this workload on cpu");
  }
}

struct HostScopeHolder {
  HostAllocationScope scope;
  UncountedMetaScope meta;  // on meta, a batch made with host_options() is host memory too: not booked
};
Context::HostMemory::HostMemory() : scope_(std::make_unique<HostScopeHolder>()) {}
Context::HostMemory::~HostMemory() = default;

struct AutocastHolder {
  explicit AutocastHolder(const AutocastSetting& setting) : scope(setting) {}
  AutocastScope scope;
};
Context::AutocastGuard::AutocastGuard(std::unique_ptr<AutocastHolder> scope) : scope_(std::move(scope)) {}
Context::AutocastGuard::~AutocastGuard() = default;
Context::AutocastGuard::AutocastGuard(AutocastGuard&&) noexcept = default;
Context::AutocastGuard& Context::AutocastGuard::operator=(AutocastGuard&&) noexcept = default;

Context::AutocastGuard Context::Autocast(at::ScalarType dtype) const {
  if (dtype != at::kBFloat16 && dtype != at::kHalf) {
    throw WorkloadError(std::string("ctx.Autocast(") + c10::toString(dtype) +
                        "): autocast runs ops in a lower precision, at::kBFloat16 or at::kHalf");
  }
  return AutocastGuard(std::make_unique<AutocastHolder>(AutocastSetting{device().type(), dtype}));
}

at::Tensor Context::ToDevice(const at::Tensor& host) {
  // Note [Host batches on meta]: on meta a batch made in this machine's memory costs real memory and
  // the time to draw it, per run and per fit trial, for values nothing reads.
  if (!has_data() && host.device().is_cpu() && !state_->warned_host_batch_on_meta) {
    state_->warned_host_batch_on_meta = true;
    state_->m.warnings.push_back(
        "on meta, ctx.ToDevice got a batch made in this machine's memory (" + FormatBytes(Bytes(host)) +
        "): every run and fit trial pays for it in host memory and time, for values meta never reads; make host "
        "batches with ctx.host_options(), which is meta on meta");
  }
  at::Tensor copy = at::empty(host.sizes(), options().dtype(host.scalar_type())).copy_(host);
  state_->inputs_bytes += Bytes(copy);
  return copy;
}

// --- the run ---

UserWorkloadRun::UserWorkloadRun(const WorkloadFunction& function, const VariantSpec& spec,
                                 const VariantMeasureOptions& options, const BackendSession& backend,
                                 RunObserver* observer, VariantMeasurement* m)
    : function_(function), state_(std::make_unique<Context::State>(spec, options, backend, observer, *m)) {}

UserWorkloadRun::~UserWorkloadRun() = default;

void UserWorkloadRun::Run() {
  Context::State& state = *state_;
  at::manual_seed(state.spec.seed);
  Context context(&state);
  // A phase left current when the function returns or throws: grad mode goes back as it was.
  struct RestoreGradMode {
    Context::State& state;
    ~RestoreGradMode() {
      if (state.grad_mode_before_eval) c10::GradMode::set_enabled(*state.grad_mode_before_eval);
    }
  } restore{state};
  try {
    function_(context);
    state.CheckEveryKnobRead();
  } catch (const WorkloadError& e) {
    state.m.input_error = e.what();
    state.m.outcome = VariantOutcome::Error(ErrorCategory::kError);
    state.m.error = e.what();
    return;
  }
  state.optimizer = nullptr;       // the function's local: gone from here on
  if (!state.iterations_called) {  // measured as one run: its end is the first iteration's
    state.m.steady_state = "one run: the workload never calls ctx.Iterations()";
    state.m.warnings.push_back((state.spec.workload.empty() ? "the workload" : "workload '" + state.spec.workload + "'") +
                               " never calls ctx.Iterations(), so it is measured as one run: live growth, leaks "
                               "and the step that repeats (with the optimizer's state) are not measured; loop over "
                               "ctx.Iterations()");
    state.EndPhase();
    if (!state.m.grad_bytes) state.TakeGradients();
    state.TakeOptimizerState();
  }
}

LiveBreakdown UserWorkloadRun::Breakdown(int64_t live_at_refusal) const {
  const Context::State& state = *state_;
  LiveBreakdown b;
  b.parameters_bytes = state.m.param_bytes;
  for (const at::Tensor& p : state.parameters) b.gradients_bytes += Bytes(p.grad());
  b.optimizer_state_bytes = state.m.optimizer_state_bytes.value_or(0);
  b.inputs_bytes = state.inputs_bytes;
  b.activations_and_transient_bytes =
      live_at_refusal - b.parameters_bytes - b.gradients_bytes - b.optimizer_state_bytes - b.inputs_bytes;
  return b;
}

}  // namespace oomguard
