// oomguard::Context's member functions (oomguard/workload.h): the function's side of a registered
// workload's run, over the harness's state (context_state.h).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <string>
#include <string_view>

#include "allocators/cpu_tracking_allocator.h"
#include "allocators/meta_tracking_allocator.h"
#include "backends/meta/kernel_target.h"
#include "base/byte_size.h"
#include "nn/autocast/autocast.h"
#include "workload/context/context_state.h"
#include "workload/parallel/rank_group.h"

namespace oomguard {

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
    state_->m.param_bytes += TensorBytes(p);
  }
}

void Context::Track(torch::optim::Optimizer& optimizer) { state_->optimizer = &optimizer; }

int64_t Context::Rank() const { return state_->spec.parallel.rank; }
int64_t Context::WorldSize() const { return state_->spec.parallel.world; }

c10::intrusive_ptr<c10d::Backend> Context::ProcessGroup() {
  // Note [A workload's own ranks]: the one place a rank's group is made decides gloo or fake.
  if (!state_->group) state_->group = MakeRankGroup(state_->spec.parallel, device().type());
  return state_->group;
}

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
  return AutocastGuard(std::make_unique<AutocastHolder>(
      AutocastSetting{device().type(), dtype, CurrentKernelTarget().cuda() ? c10::kCUDA : c10::kCPU}));
}

at::Tensor Context::ToDevice(const at::Tensor& host) {
  // Note [Host batches on meta]: on meta a batch made in this machine's memory costs real memory and
  // the time to draw it, per run and per fit trial, for values nothing reads.
  if (!has_data() && host.device().is_cpu() && !state_->warned_host_batch_on_meta) {
    state_->warned_host_batch_on_meta = true;
    state_->m.warnings.push_back(
        "on meta, ctx.ToDevice got a batch made in this machine's memory (" + FormatBytes(TensorBytes(host)) +
        "): every run and fit trial pays for it in host memory and time, for values meta never reads; make host "
        "batches with ctx.host_options(), which is meta on meta");
  }
  at::Tensor copy = at::empty(host.sizes(), options().dtype(host.scalar_type())).copy_(host);
  state_->inputs_bytes += TensorBytes(copy);
  return copy;
}

}  // namespace oomguard
