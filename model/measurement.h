// What running one variant measured: the data every verdict, report and baseline is made from.
// Plain types; JSON lives in measurement_json.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "allocators/fault_injection.h"
#include "allocators/ledger.h"
#include "model/diagnosis.h"
#include "model/outcome.h"

namespace oomguard {

// Only iterations that completed are recorded.
struct IterationMeasurement {
  int64_t peak_bytes = 0;                 // highest live bytes during this iteration
  int64_t live_after_backward_bytes = 0;  // right after the (last micro-batch's) backward
  int64_t live_after_bytes = 0;           // at the end of the iteration, its locals released
};

// What was live when an allocation was refused, by category.
struct LiveBreakdown {
  int64_t parameters_bytes = 0;
  int64_t gradients_bytes = 0;
  int64_t optimizer_state_bytes = 0;
  int64_t inputs_bytes = 0;                             // the batch on the device
  int64_t activations_and_transient_bytes = 0;          // the rest: saved activations, outputs, buffers
  std::vector<std::pair<std::string, int64_t>> layers;  // bytes each layer's forward left live
  // One rank's buffers for collectives (scenario `parallel`): DDP's buckets beyond the gradients, a
  // ZeRO-2 bucket's staging; 0 for one process. Part of the sum of the categories, like the others.
  int64_t communication_bytes = 0;
};

struct OomDetail {
  std::string phase;
  int64_t requested_bytes = 0;
  int64_t cap_bytes = 0;
  int64_t live_bytes = 0;
  bool injected = false;
  std::string message;  // the allocator's PyTorch-style message
  LiveBreakdown live;
};

// The caching allocator's peaks while one phase was current (its largest occurrence).
struct CudaPhaseMeasurement {
  std::string phase;
  int64_t allocated_bytes = 0, reserved_bytes = 0, active_bytes = 0, requested_bytes = 0;
};

// What only a GPU has: the caching allocator's statistics (cuda backend only).
struct CudaMeasurement {
  int64_t allocated_peak_bytes = 0;  // blocks handed out, rounded up to 512 bytes and more
  int64_t reserved_peak_bytes = 0;   // segments held from the driver: what the cap limits
  int64_t active_peak_bytes = 0;
  int64_t requested_peak_bytes = 0;  // what was asked for: the ledger's peak, counted by the allocator
  int64_t alloc_retries = 0;         // allocations that emptied the cache and tried again
  int64_t ooms = 0;
  std::vector<CudaPhaseMeasurement> phases;  // in order of first entry
  // Fragmentation at the peak: reserved_peak_bytes - allocated_peak_bytes (both peaks, as PyTorch reports them).
  // What the allocator held when the measurement began: the CUDA libraries' workspaces (Note [Library
  // workspaces on cuda], allocators/cuda/cuda_warm_up.h). The peaks above include it, as PyTorch's do.
  int64_t allocated_at_start_bytes = 0;
  int64_t reserved_at_start_bytes = 0;
  int64_t timed_transfers = 0;  // host-to-device copies timed with CUDA events
  double transfer_ms = 0;       // their GPU time (backends/cuda_transfer_timer.h)
};

// The CUDA caching allocator's statistics as CachingAllocatorModel predicts them from a cpu or meta
// run's allocations (allocators/cuda_model_feed.h): by default under a cap, where it also decides
// which requests fail (`--verdict reserved`), or as a prediction only (`--verdict allocated --model-cuda`).
struct CudaModelMeasurement {
  int64_t allocated_peak_bytes = 0;  // blocks: requests rounded up to 512 bytes, or whole unsplit blocks
  int64_t reserved_peak_bytes = 0;   // segments: what a GPU would have to hold
  int64_t requested_peak_bytes = 0;  // what was asked for while the model was fed
  int64_t segments_peak = 0;
  int64_t alloc_retries = 0;  // segment allocations retried after releasing the cache
  int64_t ooms = 0;           // requests the model's cap refused (Note [Predicted OOMs])
  bool decides = false;       // its refusals were the run's OOMs (the verdict on reserved bytes)
  // What the model held before the scenario's first tensor: a card's cuBLAS and cuBLASLt workspaces in
  // card mode (Note [cuBLAS workspaces held from the start]), outside the ledger, as the cuda backend's
  // CudaMeasurement::allocated_at_start_bytes. The peaks above include it, as PyTorch's do.
  int64_t allocated_at_start_bytes = 0;
  int64_t reserved_at_start_bytes = 0;
};

// How a TorchScript module (model.torchscript) ran, so that a reader can trust its numbers.
struct ModuleMeasurement {
  std::string file;
  // "saved": the file's weights, copied to the device; "seeded": saved from meta, drawn from the seed
  // on a backend with data; "shapes": on meta, shapes only.
  std::string weights;
  // The graph executor's optimisation and fusion, off on every thread that runs the module, so its
  // autograd saves what eager PyTorch saves (Note [Eager autograd for TorchScript]).
  bool graph_optimization = false;
  int64_t segments = 0;  // top-level children of an nn.Sequential (the per-layer knobs act between them)
  std::string output;    // which value of the forward's result the loss reads: "tensor", "tuple[0]", "dict[logits]"
};

// One rank of a data-parallel or sharded run (scenario `parallel`, workload/parallel/data_parallel.h): which
// rank, and what it holds for its collectives. param_bytes, grad_bytes and optimizer_state_bytes of
// the VariantMeasurement are this rank's.
struct ParallelMeasurement {
  int64_t world = 1;
  int64_t rank = 0;
  std::string strategy;  // ddp | zero1 | zero2 | fsdp
  // Held for collectives after the first iteration: ddp's bucket buffers (with gradient_as_bucket_view
  // the gradients are views of them, and grad_bytes counts the same bytes).
  int64_t communication_bytes = 0;
  // ddp: each bucket's buffer, in the order they are reduced; fsdp: each unit's flat all-gather output
  // (world x its padded shard), the root's first (Note [One FSDP2 rank], workload/parallel/fully_sharded.h).
  std::vector<int64_t> bucket_bytes;
  // ddp with gradient_as_bucket_view: the buckets are the gradients' storage, so communication_bytes and
  // grad_bytes are the same bytes (a report must not read them as a sum).
  bool buckets_are_gradients = false;
  // The precision the rank ran at, beyond its model's dtype (reports name it beside the strategy).
  // fsdp's MixedPrecisionPolicy as FSDP2 clamps it (Note [FSDP2 mixed precision],
  // workload/parallel/fully_sharded.h): the gathered parameters' dtype and the reduce-scatter's, both
  // set where either differs from the model's dtype, both empty where neither does.
  std::string param_dtype;
  std::string reduce_dtype;
  // loop.optimizer.master_weights: the optimizer steps float32 masters of what the rank steps (Note
  // [Master weights], workload/loop/master_weights.h).
  bool master_weights = false;
  bool operator==(const ParallelMeasurement&) const = default;
};

// One of a variant's real ranks (Note [Real ranks on cpu], workload/parallel/rank_group.h): its own numbers,
// from its own child's ledger. Note [Whose measurement is the variant's] (run/rank_children.h).
struct RankMeasurement {
  int64_t rank = 0;
  VariantOutcome outcome;
  // Its OOM or error; for a rank the runner ended after a sibling failed (ended), why; for a child that
  // ended without a measurement (a crash, a kill, its timeout), how it ended.
  std::string error;
  bool ended = false;     // killed by the runner because a sibling failed: no numbers
  bool measured = false;  // its child wrote a measurement: the numbers below are its
  int64_t peak_bytes = 0;
  std::string peak_phase;
  std::vector<PhasePeak> phase_peaks;
  std::vector<PhasePeak> peak_by_origin;  // at its peak, the live bytes by the phase that allocated them
  std::vector<IterationMeasurement> iterations;
  int64_t param_bytes = 0;
  std::optional<int64_t> grad_bytes;
  std::optional<int64_t> optimizer_state_bytes;
  int64_t communication_bytes = 0;  // its ParallelMeasurement's
  double duration_ms = 0;
};

struct VariantMeasurement {
  std::string variant;
  std::string backend;
  std::string card;  // simulated card, empty for a plain cap
  int64_t cap_bytes = 0;
  VariantOutcome outcome;          // pass | oom | error:<category> (workload/error_category.h)
  std::string error;               // the message, for oom and errors
  std::string attention = "math";  // the attention implementation the layers use
  // Whose kernels made the allocations: "cpu" (cpu, and meta mirroring cpu), "cuda sm_75" (meta
  // mirroring a card's CUDA kernels, `--kernels cuda`, backends/meta/kernel_target.h), "cuda" (a GPU's own).
  std::string kernels = "cpu";
  double duration_ms = 0;

  LedgerStats ledger;  // peak, per-phase peaks, allocation count, timeline
  // The completed iterations' records: all of them, or (Note [Bounded iteration records]) the first
  // and the last kIterationRecordsKept / 2, with the iterations_left_out completed between them not kept.
  std::vector<IterationMeasurement> iterations;
  int64_t iterations_left_out = 0;
  int64_t transfers = 0;
  int64_t transfer_bytes = 0;
  int64_t param_bytes = 0;
  // Absent when the run ended before measuring them (an OOM before the first optimizer step, say):
  // a check on a number never measured must not pass by reading 0.
  std::optional<int64_t> grad_bytes;             // gradients live after the first iteration's backward
  std::optional<int64_t> optimizer_state_bytes;  // what the first optimizer step left live
  std::optional<int64_t> forward_saved_bytes;    // what the first forward left live (saved tensors, output, loss)
  std::optional<int64_t> retained_grad_bytes;    // gradients held by intermediates (retain_grad)
  // loop.clip_grad_norm: what clipping the first step's gradients added, at its peak, to what was live.
  std::optional<int64_t> clip_grad_norm_bytes;
  std::string grad_digest;  // FNV-1a of every parameter gradient after the first backward
  std::optional<OomDetail> oom;
  std::optional<CudaMeasurement> cuda;             // cuda backend only
  std::optional<CudaModelMeasurement> cuda_model;  // cpu and meta with --model-cuda
  std::vector<InjectedFailure> injected;
  // --inject: the spec as the injector evaluates it and the allocation requests it saw; a variant in
  // which it never fired fails (verdict.cpp), since a fault that never fires rehearses nothing.
  struct Injection {
    std::string spec;
    int64_t requests_seen = 0;
  };
  std::optional<Injection> injection;
  // A registered workload and its scenario disagree (a knob missing, of another type or never read):
  // not a measurement but an input error; outcome is error:error. Not in the JSON: a child exits 2
  // with it, and the parent reports the variant UNRESOLVED.
  std::string input_error;
  std::optional<ModuleMeasurement> module;  // model.torchscript only
  std::optional<ParallelMeasurement> parallel;  // a scenario's `parallel` with world > 1
  // Every rank's numbers, in rank order, where the variant ran real ranks (cpu); empty where one rank
  // was simulated (meta) or there is no `parallel`. The rest of the measurement is one rank's (Note
  // [Whose measurement is the variant's], run/rank_children.h).
  std::vector<RankMeasurement> ranks;
  std::vector<std::string> warnings;        // what a reader should know before trusting the numbers
  // How the run met the step that repeats (Note [The step that repeats], workload/loop/steady_state.h):
  // "2 iterations, not 1: adamw keeps state ...", "every iteration: sgd without momentum ...".
  std::string steady_state;
  bool iterations_raised = false;  // it ran more iterations than asked, for the step that repeats
  std::string snapshot;                     // --snapshot-dir: the memory_viz snapshot written for this variant
  std::string snapshot_error;               // why it could not be written
  // The pitfalls the run showed (diagnose/detectors.h), in a fixed order of kinds; empty: none found.
  std::vector<Diagnosis> diagnoses;
  bool diagnosed = false;  // the detectors watched this run (a run that ended early has none)
  // Set when the detectors screened the run before watching it (Note [Screen, then watch],
  // diagnose/run_observer.h): what made them run it again, watched ("eval", "kept", "retained-grad",
  // "checkpoint-rng", "inplace", "growth"; empty: nothing, it ran once), and that run's time, which
  // duration_ms includes.
  struct Screen {
    std::string cause;
    double watch_ms = 0;
  };
  std::optional<Screen> screen;
};

// Note [Bounded iteration records]
// A measurement is a file the runner reads back with the input limit (16 MiB), and every iteration
// count --iterations and loop.iterations accept (up to 1000000) must fit in it: 100000 iterations'
// records alone took 8 MB. So a run keeps the records of its first and last kIterationRecordsKept / 2
// iterations and counts the ones between (iterations_left_out): what growth, leaks and the first
// steps' numbers are read from. The catalog runs at most a few dozen iterations, far below the bound,
// so its measurements keep every record. `iteration_peak[N]` of an iteration left out is not measured.
inline constexpr size_t kIterationRecordsKept = 10000;

// Keeps the first and last kept / 2 records of m->iterations, counting the rest in iterations_left_out.
void KeepFirstAndLastIterations(VariantMeasurement* m, size_t kept = kIterationRecordsKept);

// One rank's numbers out of its own child's measurement (the variant's ranks[]).
RankMeasurement RankOf(const VariantMeasurement& m, int64_t rank);

// The iterations that completed, kept or left out.
int64_t CompletedIterations(const VariantMeasurement& m);

// Iteration `number` (1-based) when its record was kept; nullptr when it was left out or did not complete.
const IterationMeasurement* IterationNumbered(const VariantMeasurement& m, int64_t number);

// (live after the last iteration - live after the first) / (iterations - 1); nullopt below 2 iterations.
std::optional<double> LiveGrowthPerIteration(const VariantMeasurement& m);

// The model's numbers as the console's `cuda model:` line and Measurement::Describe say them:
// "allocated 6.50 KiB, reserved 2.00 MiB (fragmentation 1.99 MiB), 0 retries, 0 OOMs; the verdict is on
// reserved bytes", and "; reserved includes ... held from the start (...)" when something was.
std::string DescribeCudaModel(const CudaModelMeasurement& c);

}  // namespace oomguard
