#include "workload/loop/steady_state.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <algorithm>

namespace oomguard {
namespace {

// `who` keeps state: one iteration is raised to two.
StepThatRepeats WithState(const std::string& who, int64_t requested) {
  StepThatRepeats s;
  s.requested = requested;
  s.iterations = std::max<int64_t>(requested, 2);
  s.note = s.raised() ? "2 iterations, not 1: " + who +
                            " keeps state from its first step on, so the step that repeats is the second"
                      : "from iteration 2: " + who + " keeps state from its first step on";
  return s;
}

StepThatRepeats Stateless(const std::string& why, int64_t requested) {
  StepThatRepeats s;
  s.requested = s.iterations = requested;
  s.note = "every iteration: " + why;
  return s;
}

}  // namespace

bool KeepsState(const OptimizerSpec& optimizer) {
  return optimizer.kind == "adam" || optimizer.kind == "adamw" || (optimizer.kind == "sgd" && optimizer.momentum > 0);
}

StepThatRepeats StepThatRepeatsForLoop(const LoopSpec& loop, int64_t requested) {
  if (!loop.backward) return Stateless("the loop takes no optimizer step (loop.backward false)", requested);
  if (loop.optimizer.kind == "none") return Stateless("the loop has no optimizer", requested);
  if (!KeepsState(loop.optimizer)) return Stateless(loop.optimizer.kind + " without momentum keeps no state", requested);
  return WithState(loop.optimizer.kind, requested);
}

StepThatRepeats StepThatRepeatsForWorkload(const torch::optim::Optimizer* optimizer, int64_t requested) {
  if (optimizer == nullptr) {  // none tracked: the workload's optimizer, if any, is unknown
    StepThatRepeats s;
    s.requested = s.iterations = requested;
    s.note = requested >= 2 ? "from iteration 2: any state the workload's optimizer keeps is built by then"
                            : "1 iteration and no optimizer tracked: if the workload's optimizer keeps state, the step "
                              "that repeats is not measured (ctx.Track(optimizer) lets oomguard run a second)";
    return s;
  }
  if (const auto* sgd = dynamic_cast<const torch::optim::SGD*>(optimizer)) {
    const auto& groups = sgd->param_groups();
    const bool momentum =
        !groups.empty() && static_cast<const torch::optim::SGDOptions&>(groups.front().options()).momentum() > 0;
    if (!momentum) return Stateless("SGD without momentum keeps no state", requested);
    return WithState("SGD with momentum", requested);
  }
  const char* kind = dynamic_cast<const torch::optim::AdamW*>(optimizer)     ? "AdamW"
                     : dynamic_cast<const torch::optim::Adam*>(optimizer)    ? "Adam"
                     : dynamic_cast<const torch::optim::RMSprop*>(optimizer) ? "RMSprop"
                     : dynamic_cast<const torch::optim::Adagrad*>(optimizer) ? "Adagrad"
                                                                             : "the tracked optimizer";
  return WithState(kind, requested);
}

StepThatRepeats StepThatRepeatsForNamedOptimizer(const std::string& kind, bool keeps_state, int64_t requested) {
  return keeps_state ? WithState(kind, requested) : Stateless(kind + " without momentum keeps no state", requested);
}

}  // namespace oomguard
