// The phases of a training step, as the workload books allocations under them, phase_peak.<phase>
// names them in checks, and reports show them.
//
//   ledger.SetPhase(Name(Phase::kForward));   // the ledger (allocators/, floor 1) takes the name
//   Phase p;
//   if (Parse(peak.phase, &p) && p == Phase::kBackward) ...
//
// Note [Phases as names in the ledger]: the ledger stays string-based. It is a generic account on
// floor 1 that books whatever the caller calls a phase (a test's "p1", a benchmark's "forward") and
// knows nothing of training steps, so the training loop's vocabulary lives here, one floor up, and
// the workload converts at its boundary. Ledger::kInitialPhase is Name(Phase::kSetup) (a test says so).
#pragma once

#include <array>
#include <string_view>

#include "model/enum_names.h"

namespace oomguard {

// In the order a step runs them (the order error messages list them in). kStep is a registered
// workload's (oomguard/workload.h): inside its iteration loop, outside any phase it marks; the
// catalog's loop marks everything and never uses it.
enum class Phase { kSetup, kTransfer, kForward, kBackward, kOptimizer, kZeroGrad, kEval, kStep };

template <>
struct EnumNames<Phase> {
  static constexpr std::array<std::string_view, 8> kNames = {"setup",     "transfer",  "forward", "backward",
                                                             "optimizer", "zero_grad", "eval",    "step"};
};

}  // namespace oomguard
