#include "workload/user_workload_run.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "workload/context/context_state.h"

namespace oomguard {

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
  for (const at::Tensor& p : state.parameters) b.gradients_bytes += TensorBytes(p.grad());
  b.optimizer_state_bytes = state.m.optimizer_state_bytes.value_or(0);
  b.inputs_bytes = state.inputs_bytes;
  b.activations_and_transient_bytes =
      live_at_refusal - b.parameters_bytes - b.gradients_bytes - b.optimizer_state_bytes - b.inputs_bytes;
  return b;
}

}  // namespace oomguard
