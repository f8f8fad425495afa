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
  const ParallelSpec& parallel = state.spec.parallel;
  if (parallel.active()) {  // Note [A workload's own ranks]
    ParallelMeasurement& p = state.m.parallel.emplace();
    p.world = parallel.world;
    p.rank = parallel.rank;
    p.strategy = "own";
  }
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
  if (!state.iterations_called) {
    state.EndWithoutIterations("the workload", state.spec.workload.empty() ? "the workload" : "workload '" + state.spec.workload + "'",
                               "ctx.Iterations()");
  }
}

LiveBreakdown UserWorkloadRun::Breakdown(int64_t live_at_refusal) const {
  return state_->Breakdown(live_at_refusal);
}

}  // namespace oomguard
