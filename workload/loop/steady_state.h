// How many iterations a measurement runs so that it judges the step that repeats, and the sentence
// that says so (VariantMeasurement::steady_state, the console, the results and fit JSON).
//
//   const oomguard::StepThatRepeats s = oomguard::StepThatRepeatsForLoop(spec.loop, /*requested=*/1);
//   s.iterations;  // 2 for Adam: its state is built in the first step
//   s.note;        // "2 iterations, not 1: adamw keeps state from its first step on, ..."
//
// Note [The step that repeats]: a training step that repeats holds the parameters, the gradients, the
// optimizer's state and one step's activations. An optimizer that keeps state (Adam's and AdamW's two
// moments, SGD's momentum, RMSprop's and Adagrad's sums) builds it in its first step, after the first
// forward and backward, so one iteration never has the state and the activations live together: it
// sizes a step that never repeats (the 7B decoder of examples/pytorch-model "fit" batch 7 on an H100
// with one iteration, 4 with two). A card's verdict and a fit must judge the step that repeats, so a
// run whose optimizer keeps state runs at least two iterations, and says so when it raised them.
//
// Error policy: pure functions; nothing fails.
#pragma once

#include <cstdint>
#include <string>

#include "model/scenario.h"

namespace torch::optim {
class Optimizer;
}

namespace oomguard {

struct StepThatRepeats {
  int64_t requested = 1;   // what was asked (loop.iterations or --iterations)
  int64_t iterations = 1;  // what to run: `requested`, or 2 where one iteration never repeats its step
  std::string note;        // how the measurement meets the step that repeats, one sentence
  bool raised() const { return iterations > requested; }
};

// Whether an optimizer of this spec keeps state from step to step (adam, adamw; sgd with momentum).
bool KeepsState(const OptimizerSpec& optimizer);

// A scenario's loop (layer list or TorchScript module); `requested` >= 1 (loop.iterations or
// --iterations). A loop without backward takes no optimizer step: every iteration is the same.
StepThatRepeats StepThatRepeatsForLoop(const LoopSpec& loop, int64_t requested);

// A registered workload's, when it calls ctx.Iterations(): `optimizer` is what it tracked
// (ctx.Track(optimizer)) or null. LibTorch's kinds are known (Adam, AdamW, RMSprop, Adagrad keep
// state; SGD with momentum); another kind is taken to keep state.
StepThatRepeats StepThatRepeatsForWorkload(const torch::optim::Optimizer* optimizer, int64_t requested);

// An optimizer known by its name only (a Python one, tracked with m.track(opt)): `keeps_state` false
// for SGD without momentum.
StepThatRepeats StepThatRepeatsForNamedOptimizer(const std::string& kind, bool keeps_state, int64_t requested);

}  // namespace oomguard
