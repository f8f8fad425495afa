// Watches a run's operators for what the detectors need (diagnose/detectors.h), whatever wrote the run:
// a layer list, a TorchScript module or a registered workload. It never reads a scenario's knobs.
//
//   oomguard::RunObserver observer(ledger, &layer_trace, at::kCPU);  // watches every op (ops/op_stream.h)
//   observer.BeginIteration(1);
//   ... forward ...; observer.BackwardDone();   // right after backward, the step's locals still alive
//   ... eval ...;    observer.EvalDone();       // at the end of an evaluation, its locals still alive
//   observer.EndIteration();                    // after the iteration's locals are gone
//   const RunObservations& seen = observer.observations();
//
// What it sees: every operator's outputs. Each output's storage is remembered (a weak reference, so
// nothing is kept alive) with the iteration, the phase and the layer that made it, and each output's
// autograd node (a weak reference too). At the marks above it asks what is still alive:
// - EvalDone: nodes made in this evaluation, and the bytes it made (eval-keeps-graph). In a workload
//   that is when its eval phase ends: a graph held by a local declared after `ctx.Phase("eval")` is
//   gone by then (C++ destroys it first), and only what outlives the phase is seen;
// - BackwardDone: non-leaf outputs holding a .grad (retained-grad);
// - EndIteration: nodes of the previous iteration, and the bytes its forward and evaluation made
//   (graph-kept-across-iterations; what is left is a leak).
// It also keeps the last in-place operator on a tensor that requires grad (inplace-on-saved and
// -on-leaf name it) and counts random draws a checkpoint recomputes without its RNG state
// (checkpoint-rng, nn/checkpoint.h).
//
// Note [Screen, then watch]: watching every operator's outputs costs what the operator's dispatch
// costs (RecordFunction built, results captured): nothing beside a cpu or cuda kernel, 1.55x a 7B step on
// meta, where operators have no kernels. So an observer can instead screen a run, watching no operator:
// at the same marks it asks the ledger (Note [Epochs], allocators/ledger.h) and autograd's sequence
// numbers whether a watch could find anything, and it says why (suspicion()):
// - "eval": autograd nodes were made since the previous mark and bytes the evaluation's phase allocated
//   are alive at EvalDone (a watch reports an evaluation keeping nodes and bytes);
// - "kept": at the end of iteration N+1, bytes iteration N allocated outside backward, optimizer and
//   zero_grad are alive (a kept graph holds some: a watch reports one only with bytes);
// - "retained-grad": a backward node ran with a retain_grad() hook (autograd's current node);
// - "checkpoint-rng": a random operator ran while a checkpoint recomputed without its RNG state
//   (nn/checkpoint.h): only then are operators watched, for their names alone.
// A screened run found nothing when its suspicion is empty and its outcome and live bytes give no cause
// (workload/workload.cpp: an in-place error, live bytes that grow); otherwise it is run again, watched.
//
// One observer at a time per process (its state is global, for the callback); construct and destroy it on the
// controlling thread. Callbacks may come from other threads (the autograd engine's): one mutex.
#pragma once

#include <c10/core/DeviceType.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "allocators/ledger.h"
#include "nn/layer_trace.h"

namespace oomguard {

// Bytes still alive at a mark, grouped by where they were made.
struct AliveGroup {
  std::string phase;
  std::string location;  // "the forward of layer 2:linear", "the loss"; empty when unknown
  int64_t bytes = 0;
};

// What was alive at the end of one evaluation (the first with graph nodes alive; the largest).
struct EvalFinding {
  int64_t iteration = 0;
  int64_t nodes = 0;  // autograd nodes the evaluation made, still alive
  int64_t bytes = 0;  // storages the evaluation made, still alive
  std::string root;   // the newest alive node's name: what holds the graph ("NllLossBackward0")
  std::string where;  // where that node was made
  int64_t event_index = -1;
};

struct RetainedGradFinding {
  int64_t iteration = 0;
  int64_t tensors = 0;  // non-leaf tensors holding a .grad
  int64_t bytes = 0;    // their gradients' bytes
  std::string where;    // where the largest was made
};

// At the end of iteration N+1, what iteration N left alive (the last such pair of the run).
struct KeptFinding {
  int64_t iteration = 0;  // N
  int64_t nodes = 0;      // autograd nodes of iteration N still alive (0: none)
  std::string root;       // the newest of them
  std::string root_where;
  int64_t bytes = 0;               // storages iteration N made outside backward, optimizer and zero_grad, still alive
  std::vector<AliveGroup> groups;  // those bytes by phase and location, largest first
  int64_t event_index = -1;        // where iteration N began
};

struct InplaceOp {
  std::string op;  // "aten::mul_"
  std::string phase;
  std::string location;
  std::vector<int64_t> sizes;
  int64_t bytes = 0;
};

struct RunObservations {
  std::vector<EvalFinding> evals;             // one per evaluation that left nodes alive
  std::vector<RetainedGradFinding> retained;  // one per backward that left retained grads
  std::vector<KeptFinding> kept;              // one per iteration boundary N -> N+1
  std::vector<InplaceOp> inplace;             // in-place ops on tensors requiring grad, in order (bounded)
  std::string last_inplace_started;           // the last in-place op that started (it may have thrown)
  std::string last_inplace_started_location;
  int64_t unseeded_recompute_draws = 0;  // random ops recomputed without the forward's RNG state
  int64_t unseeded_recompute_bytes = 0;
  std::string unseeded_recompute_where;
  int64_t iterations = 0;  // completed
};

class RunObserver {
 public:
  enum class Mode {
    kWatch,   // every operator's outputs: the observations the detectors read
    kScreen,  // no operator: only whether a watch could find something (Note [Screen, then watch])
  };
  // Watches the storages of `device`'s tensors (the backend's), booked in `ledger`, whose epoch it sets
  // at each iteration (Note [Epochs], allocators/ledger.h).
  RunObserver(Ledger& ledger, const LayerTrace* trace, c10::DeviceType device, Mode mode = Mode::kWatch);
  ~RunObserver();
  RunObserver(const RunObserver&) = delete;
  RunObserver& operator=(const RunObserver&) = delete;

  // Where the calling code is, for operators no LayerTrace places (a Python loop's: "train.py:41
  // (total += loss)", python/core.cpp). Asked once per outermost operator, on the thread that runs it,
  // before any lock is taken; an empty answer falls back to the trace. Set before the run.
  using CallerLocation = std::function<std::string()>;
  void SetCallerLocation(CallerLocation where);

  void BeginIteration(int64_t iteration);
  void BackwardDone();
  void EvalDone();
  void EndIteration();

  // kScreen: only `iterations` is filled in.
  const RunObservations& observations() const { return observations_; }
  // kScreen: why a watch could find something ("eval", "kept", "retained-grad", "checkpoint-rng"; the
  // first seen), empty if nothing so far. kWatch: empty.
  std::string suspicion() const;
  // Entries it holds (storages, nodes, non-leaf tensors, most of them weak): bounded by what is alive.
  size_t tracked() const;

  // For the callback.
  struct State;   // diagnose/run_observer_state.h
  struct Watch;   // diagnose/run_watch.h
  struct Screen;  // diagnose/run_screen.h

 private:
  std::unique_ptr<State> state_;
  RunObservations observations_;
  std::unique_ptr<Watch> watch_;
  std::unique_ptr<Screen> screen_;
};

}  // namespace oomguard
