// A registered workload's function as the body of a measurement (workload/measured_run.h): it gets an
// oomguard::Context (oomguard/workload.h) over the backend's ledger, and the harness turns the
// context's phases, iterations, tracked parameters and optimizer into the same measurement the
// catalog's training loop fills.
//
//   UserWorkloadRun run(function, spec, options, backend, observer, &m);  // observer may be null
//   run.Run();  // throws what the function raises; a WorkloadError becomes m.input_error
//
// What is measured where (Note [A workload's numbers]): iterations at ctx.Iterations()'s boundaries;
// forward_saved_bytes over the first forward phase; live_after_backward_bytes when each backward
// phase ends; gradient bytes and digest of the tracked parameters when the first backward phase ends
// (or the first iteration does); optimizer-state bytes from the tracked optimizer's state tensors at
// the end of the first iteration (an optimizer kind the harness does not know, or none tracked: what
// the first optimizer phase left live). The observer hears of each backward and eval phase's end and
// each iteration's (diagnose/run_observer.h); with options.eval_no_grad every eval phase runs under
// no_grad (the measured fix of eval-keeps-graph).
#pragma once

#include "backends/backend.h"
#include "diagnose/run_observer.h"
#include "model/scenario.h"
#include "oomguard/workload.h"
#include "workload/measured_run.h"
#include "workload/workload.h"

namespace oomguard {

class UserWorkloadRun final : public MeasuredRun {
 public:
  UserWorkloadRun(const WorkloadFunction& function, const VariantSpec& spec, const VariantMeasureOptions& options,
                  const BackendSession& backend, RunObserver* observer, VariantMeasurement* m);
  ~UserWorkloadRun() override;

  void Run() override;
  LiveBreakdown Breakdown(int64_t live_at_refusal) const override;

 private:
  const WorkloadFunction& function_;
  std::unique_ptr<Context::State> state_;
};

}  // namespace oomguard
