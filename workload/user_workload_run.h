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
//
// Note [A workload's own ranks]
// A registered workload's variant may say "parallel": {"world": N, "rank": r}, and nothing else of it:
// the strategies (ddp, zero1, zero2, fsdp) are oomguard's loop for layer lists, and a workload's loop
// is its own code, so a `strategy` or another key is an input error naming its JSON path rather than
// a setting silently ignored (scenario/workload_json.h). The function reads ctx.Rank(), ctx.WorldSize()
// and ctx.ProcessGroup(), which MakeRankGroup makes (workload/parallel/rank_group.h, the one place that decides):
// on cpu at world > 1 the runner starts the N ranks as it does a layer list's (run/rank_children.h)
// and each child's group is ProcessGroupGloo, whose own buffers are host memory; everywhere else a
// FakeProcessGroup of N in which this process is rank r (FakeProcessGroup is what PyTorch's
// estimators use). So a cpu rank and meta's simulated rank of the same scenario run the same code on
// the same ledger rules and book the same bytes (tests/workload_ranks_test.cpp). Without `parallel`
// the run is rank 0 of 1 and ProcessGroup() still returns a group, a FakeProcessGroup of 1, rather
// than null: code written for N ranks runs at 1 unchanged (a sum over one rank is the identity), as
// torch.distributed code does under a world of 1. The group is made on the first call, so a
// workload that never asks makes none, and every rank of a variant makes its groups in the same order.
// The measurement's `parallel` then says world, rank and strategy "own" (its communication bytes are
// 0: what the function holds for collectives is its own, booked under the phase that made it).
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
