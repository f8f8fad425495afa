// Measuring a training step in-process, under a card's cap, on cpu (exact bytes), meta (shapes only,
// any size) or cuda: what GoogleTest matchers (oomguard/gtest.h) and your own checks read.
//
//   #include <oomguard/measure.h>
//
//   oomguard::Measurement m = oomguard::Measure(TrainStep, {.backend = "cpu", .card = "t4",
//                                                           .knobs = {{"batch", int64_t{64}}}});
//   m.outcome;                      // "pass", "oom", "error:<category>"
//   m.peak_bytes;                   // exact on cpu and meta
//   m.cuda_model->reserved_peak_bytes;  // the CUDA caching allocator's segments, which the cap judges
//   m.phase_peak_bytes["backward"];
//   std::cout << m.Describe();      // the numbers, and what was live at the peak by phase
//
// TrainStep is a function taking oomguard::Context& (oomguard/workload.h), registered or not; by name,
// Measure("mlp_adam", ...) runs a registered one. It runs on the calling thread.
//
// Note [What an in-process measurement resets]: each call installs the options' limits on the
// backend's process-wide account, resets its statistics (peak, phase peaks, allocation count,
// timeline) and the phase to setup, seeds ATen's default generator with options.seed, and removes
// the limits when it returns. Tensors that already exist when it starts stay booked as live bytes
// (a model built outside the callable counts against the cap, as on a GPU); what the callable leaves
// alive after it returns shows as live bytes after the last iteration, not as a leak between calls.
// Calls are serialised (a process-wide lock): the accounts are per process, so two measurements at
// once would book into each other. On cuda the peak includes the caching allocator's rounding.
//
// Note [The in-process verdict]: on cpu and meta a measurement runs the model of PyTorch's CUDA
// caching allocator, as `oomguard run` does (README, "Choosing a card or a cap"), and under a card or a
// cap the verdict is on its reserved bytes: a request whose segment would take them past the cap is an
// OOM ("oomguard cap on reserved bytes" in the message) though the tensors fit. verdict = "allocated"
// judges the tensors' bytes alone and runs no model (m.cuda_model empty); without a cap the model only
// predicts (decides false). The model sees what is allocated during the measurement: tensors that
// already exist count against the cap in the tensors' bytes only.
//
// Errors: bad options (an unknown backend, card, cap or verdict, an alloc_conf PyTorch would refuse, a
// backend not available here) and a workload whose knobs disagree with options.knobs throw
// std::invalid_argument with the reason; an OOM or a LibTorch error in the callable is the
// measurement's outcome.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "oomguard/knobs.h"
#include "oomguard/workload.h"

namespace oomguard {

struct MeasureOptions {
  std::string backend = "cpu";  // cpu | meta | cuda
  std::string card;             // a card preset ("t4"): its capacity less the modelled CUDA context, or
  std::string cap;              // a plain cap ("12GiB"); neither: no cap
  int64_t iterations = 2;       // what ctx.Iterations() yields
  int64_t seed = 0;
  Knobs knobs;                      // what ctx.Int/Number/Bool/String read
  std::vector<std::string> inject;  // fault injection, as `oomguard run --inject` takes it: "nth=3"
  // meta only: whose kernels' allocations the Meta kernels mirror, "cpu" (or empty: the default) or
  // "cuda": PyTorch's CUDA kernels at the card's compute capability (t4's without a card, sm_80 with
  // only a cap), as `oomguard run --kernels cuda` (README, "What runs on meta").
  std::string kernels;
  // cpu and meta: what a card's or a cap's verdict is on, "reserved" (or empty: the default) or
  // "allocated" (Note [The in-process verdict]), as `oomguard run --verdict`.
  std::string verdict;
  // The caching allocator model's settings in PYTORCH_ALLOC_CONF's syntax ("expandable_segments:True");
  // empty: the environment's PYTORCH_ALLOC_CONF, as `oomguard run --alloc-conf` (README, "Choosing a card
  // or a cap").
  std::string alloc_conf;
  // A path: record every allocation, free and refusal while the measurement runs, and write the
  // memory_viz snapshot there when it ends, passed or not (README, "Snapshots for memory_viz": the
  // writer of `oomguard run --snapshot-dir`), atomically; missing folders are created. Its frames name
  // the phase and, in a MeasureScope, the caller's line (SetCallerLocation). A path that cannot be
  // written throws std::invalid_argument before anything runs; a write that fails after the run
  // (a full disk) is m.snapshot_error, and the measurement stands.
  std::string snapshot;
  // Every "eval" phase under no_grad, whatever the code does: the fix of eval-keeps-graph, applied to
  // measure what it saves (`oomguard run --diagnose` does it for a registered workload's eval phases).
  bool eval_no_grad = false;
  // One rank of a data-parallel workload (Note [A workload's own ranks], workload/user_workload_run.h):
  // what ctx.Rank() and ctx.WorldSize() return. In-process there is one rank: ctx.ProcessGroup() is a
  // c10d::FakeProcessGroup of `world`, and the measurement is rank `rank`'s. 1 <= world, 0 <= rank < world,
  // else std::invalid_argument.
  int64_t world = 1;
  int64_t rank = 0;
};

struct Measurement {
  std::string outcome;  // "pass", "oom" or "error:<category>"
  std::string error;    // the message, for oom and errors
  std::string backend;
  std::string card;        // empty for a plain cap or none
  int64_t cap_bytes = -1;  // -1: no cap
  std::string kernels;     // whose kernels made the allocations: "cpu", "cuda sm_75" (meta, kernels="cuda"), "cuda"
  // One rank of a data-parallel or sharded run (Python's `oomguard.measure(world=N, rank=r)`): the
  // numbers are this rank's; `process_group` is the backend its collectives ran on ("fake": PyTorch's
  // FakeProcessGroup, which moves no data, so one process is any rank at any world size; "gloo").
  int64_t world = 1;
  int64_t rank = 0;
  std::string process_group;  // empty: no process group

  int64_t peak_bytes = 0;
  std::string peak_phase;                           // the phase that was current at the peak
  std::map<std::string, int64_t> phase_peak_bytes;  // highest live bytes while each phase was current
  // At the peak, the live bytes by the phase that allocated them: parameters (setup), activations
  // (forward), gradients (backward), optimizer state (optimizer), in order of first entry.
  std::vector<std::pair<std::string, int64_t>> live_at_peak_by_phase;
  int64_t alloc_count = 0;

  std::vector<int64_t> live_after_iteration_bytes;  // one per completed iteration
  std::vector<int64_t> iteration_peak_bytes;
  // (live after the last iteration - after the first) / (iterations - 1); none below 2 iterations.
  std::optional<double> live_growth_per_iteration_bytes;

  int64_t parameter_bytes = 0;  // what ctx.Track(parameters) was given
  std::optional<int64_t> gradient_bytes;
  std::optional<int64_t> optimizer_state_bytes;
  std::optional<int64_t> forward_saved_bytes;
  int64_t transfers = 0;  // host-to-device copies (ctx.ToDevice), and their bytes
  int64_t transfer_bytes = 0;
  // What to know before trusting the numbers ("... never calls ctx.Iterations(), so it is measured as
  // one run ..."), and how the run met the step that repeats with the optimizer's state: "2 iterations,
  // not 1: Adam keeps state from its first step on, ..." (scenarios/FORMAT.md, "The step that repeats").
  std::vector<std::string> warnings;
  std::string steady_state;

  // Where an OOM struck, and what was live by category when the allocation was refused.
  struct Oom {
    std::string phase;
    int64_t requested_bytes = 0;
    int64_t live_bytes = 0;
    bool injected = false;
    int64_t parameters_bytes = 0, gradients_bytes = 0, optimizer_state_bytes = 0, inputs_bytes = 0,
            activations_and_transient_bytes = 0;
    // "out of memory in backward: 1.00 MiB (1048576 bytes) requested with ... live: parameters ..., ...".
    std::string Describe() const;
  };
  std::optional<Oom> oom;
  // cpu and meta: the model of PyTorch's CUDA caching allocator, fed this run's allocations (Note [The
  // in-process verdict]); what torch.cuda.memory_stats() would say on the GPU. Empty with verdict "allocated".
  struct CudaModel {
    int64_t allocated_peak_bytes = 0;  // blocks: requests rounded up to 512 bytes, or whole unsplit blocks
    int64_t reserved_peak_bytes = 0;   // segments (2 MiB, 20 MiB, ...): what the card would have to hold
    int64_t requested_peak_bytes = 0;  // what was asked for while the model was fed
    int64_t segments_peak = 0;
    int64_t alloc_retries = 0;  // segment allocations retried after releasing the cache
    int64_t ooms = 0;           // requests the model's cap refused
    bool decides = false;       // its refusals were the run's OOMs: the verdict is on reserved bytes
    // Held before the first tensor, and included in the peaks: a card's cuBLAS and cuBLASLt workspaces
    // (meta with kernels "cuda"), 0 on cpu's kernels.
    int64_t allocated_at_start_bytes = 0;
    int64_t reserved_at_start_bytes = 0;
    int64_t fragmentation_bytes() const { return reserved_peak_bytes - allocated_peak_bytes; }
  };
  std::optional<CudaModel> cuda_model;
  // backend "cuda": PyTorch's own caching allocator on GPU 0, as torch.cuda.memory_stats() reads it
  // (peaks over the measurement; the cap judges reserved bytes, as set_per_process_memory_fraction does).
  struct CudaAllocator {
    int64_t allocated_peak_bytes = 0;
    int64_t reserved_peak_bytes = 0;
    int64_t active_peak_bytes = 0;
    int64_t requested_peak_bytes = 0;
    int64_t alloc_retries = 0;
    int64_t ooms = 0;
    // The CUDA libraries' workspaces (cuBLAS, cuBLASLt), taken before the measurement and in the peaks.
    int64_t allocated_at_start_bytes = 0;
    int64_t reserved_at_start_bytes = 0;
    int64_t fragmentation_bytes() const { return reserved_peak_bytes - allocated_peak_bytes; }
  };
  std::optional<CudaAllocator> cuda;
  // The pitfalls the run showed (oomguard's detectors watch every run; scenarios/FORMAT.md, "Diagnoses").
  struct Diagnosis {
    std::string kind;      // "eval-keeps-graph", "graph-kept-across-iterations", "retained-grad", "leak", ...
    std::string severity;  // "pitfall", or "advice" (activations-dominate)
    int64_t bytes = 0;     // what it accounts for; `per` says when: peak, iteration, step, phase_end, once
    std::string per;
    std::string phase;
    std::string where;  // the layer, stage or autograd node, when known
    std::string message;
    std::string fix;
    std::string amount;  // the bytes as the reports say them: "1.26 MiB per iteration", "20.16 MiB at the end of eval"
  };
  std::vector<Diagnosis> diagnoses;
  // options.inject: the spec as the injector evaluates it (several specs: "nth=3 | min-size=1048576"),
  // the allocation requests it saw, and each failure it injected (the request's index as it counted
  // them, its bytes and phase, the policy that fired): what reproduces "the 3rd request, of 4096
  // bytes, in backward". A spec that never fired is a warning (it tests nothing).
  struct Injection {
    struct Failure {
      int64_t allocation_index = 0;
      int64_t bytes = 0;
      std::string phase;
      std::string policy;
    };
    std::string spec;
    int64_t requests_seen = 0;
    std::vector<Failure> failures;
  };
  std::optional<Injection> injection;
  std::string snapshot;        // options.snapshot, once written
  std::string snapshot_error;  // why it could not be written

  bool passed() const { return outcome == "pass"; }
  bool ran_out_of_memory() const { return outcome == "oom"; }
  // Live bytes grow from iteration to iteration: live_growth_per_iteration_bytes > 0.
  bool leaks() const { return live_growth_per_iteration_bytes && *live_growth_per_iteration_bytes > 0; }
  // The diagnosis of that kind, or null.
  const Diagnosis* diagnosis(const std::string& kind) const;
  // Several lines: outcome, peak and its phase, the model's peaks, phase peaks, live at the peak by
  // phase, iterations, for an OOM the refused request and the live bytes by category, and the
  // diagnoses. Matchers' messages use it.
  std::string Describe() const;
};

Measurement Measure(const WorkloadFunction& workload, const MeasureOptions& options = {});
// A registered workload (oomguard/workload.h) by name; an unknown name throws std::invalid_argument.
Measurement Measure(const std::string& registered_workload, const MeasureOptions& options = {});

// A measurement as a scope, for code that is not one function (the Python package's `with
// oomguard.measure(...)`, python/): the constructor does what Measure does before it calls the
// function (Note [What an in-process measurement resets]) and holds the process-wide lock; Finish
// gives the numbers so far and removes the limits; the destructor finishes a scope not finished.
// Phases, iterations and tracking are a Context's (oomguard/workload.h), measured by the same code:
//
//   oomguard::MeasureScope scope({.backend = "cpu", .card = "t4"});
//   scope.Track(parameters);                          // ctx.Track(parameters)
//   for (int64_t i = 1, n = scope.Iterations(3); i <= n; ++i) {   // ctx.Iterations()
//     scope.BeginIteration(i);
//     scope.SetPhase("forward");  ... scope.SetPhase("backward"); ...
//     scope.EndIteration();                           // only completed iterations count
//   }
//   oomguard::Measurement m = scope.Finish();          // outcome "pass"
//   // or, when an allocation past the cap threw c10::OutOfMemoryError (torch.OutOfMemoryError):
//   oomguard::Measurement m = scope.FinishWithError(e.what());   // outcome "oom", m.oom by category
//
// Phases are the names of Context::Phase ("setup", "forward", "backward", "optimizer", "eval", ...);
// another name, a second Iterations() or an iteration outside it throws std::invalid_argument.
// Options' iterations, seed and knobs are ignored. The detectors watch every operator (m.diagnoses).
class MeasureScope {
 public:
  explicit MeasureScope(const MeasureOptions& options);
  ~MeasureScope();
  MeasureScope(const MeasureScope&) = delete;
  MeasureScope& operator=(const MeasureScope&) = delete;

  // `unwinding`: an exception leaves the phase, which is then not measured (as Context::PhaseGuard).
  void SetPhase(const std::string& phase, bool unwinding = false);
  std::string phase() const;
  // How many iterations to run for `requested` (>= 1): raised to 2 for a tracked optimizer that keeps
  // state (Note [The step that repeats], workload/loop/steady_state.h). Once per scope.
  int64_t Iterations(int64_t requested);
  void BeginIteration(int64_t index);  // 1 ... Iterations(requested)
  void EndIteration();                 // live bytes after it, its peak; the first one's gradients and state
  // The parameters; their gradients are read when the first backward phase (or iteration) ends.
  void Track(const std::vector<at::Tensor>& parameters);
  // Gradients that the tracked tensors' .grad does not hold (Python's DTensor parameters: their local
  // shards are tracked, their gradients are the DTensors' .grad): a function giving those gradients'
  // bytes now, read with the tracked ones'. Released by Finish.
  void TrackGradients(std::function<int64_t()> gradient_bytes);
  // An optimizer that is not a torch::optim::Optimizer (a Python one): its kind ("AdamW"), whether it
  // keeps state (false for SGD without momentum), and a function giving its state's bytes now
  // (nullopt: not readable), read at the end of the first optimizer phase or iteration. The function
  // is released by Finish.
  void TrackOptimizer(const std::string& kind, bool keeps_state, std::function<std::optional<int64_t>()> state_bytes);
  // Where the calling code is ("train.py:41 (total += loss)"), asked once per outermost operator on the
  // thread that runs it: diagnoses name the place their bytes and graphs were made. Released by Finish.
  void SetCallerLocation(std::function<std::string()> where);
  // The live bytes now, booked on the scope's backend.
  int64_t live_bytes() const;
  Measurement Finish();
  // The scope's code ended with an exception whose message is `what`: an OOM when the backend's
  // allocator refused a request during the scope (outcome "oom", m.oom with the live bytes by
  // category), else "error:error".
  Measurement FinishWithError(const std::string& what);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The usable bytes of a card preset (its capacity less the modelled CUDA context, what --card caps
// at); an unknown name throws std::invalid_argument naming the presets.
int64_t CardCapBytes(const std::string& card);
// "12GiB", "512MiB", "1e9" as --cap reads it; malformed text throws std::invalid_argument.
int64_t ParseBytes(const std::string& size);
// "1.52 MiB (1597480 bytes)": how matchers' messages write a size.
std::string DescribeBytes(int64_t bytes);

}  // namespace oomguard
