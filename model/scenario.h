// The scenario model: what a scenario file describes, as plain types (no JSON here; the loader in
// scenario_loader.h builds these from files, and keeps every JSON detail out of the rest).
//
// A scenario is a base configuration plus named variants; each variant is the base with a JSON merge
// patch applied, already resolved into a full VariantSpec by the loader. Expectations say what each
// variant must show (outcome, leak or not, metric checks), and checks relate variants to each other.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/diagnosis.h"
#include "model/dtype.h"
#include "model/knobs.h"
#include "model/outcome.h"

namespace oomguard {

// One layer of a model. Which fields matter depends on `kind`; the loader rejects fields a kind does
// not take. Dimensions are features of the last axis.
struct LayerSpec {
  std::string kind;                 // a LayerKinds() row's name (model/layer_kinds.h): what fields it takes
  int64_t in = 0;                   // linear: input features
  int64_t out = 0;                  // linear: output features
  int64_t dim = 0;                  // layer_norm, embedding, attention, mlp_block, transformer_block
  int64_t hidden = 0;               // mlp_block, transformer_block: hidden features of the MLP
  int64_t heads = 0;                // attention, transformer_block
  int64_t vocab = 0;                // embedding: number of rows
  double p = 0.0;                   // dropout probability (dropout; attention/transformer_block dropout)
  double factor = 1.0;              // scale: multiply by this
  bool inplace = false;             // relu/gelu/dropout/scale: modify the input in place
  bool causal = false;              // attention, transformer_block
  bool bias = true;                 // linear
  std::string activation = "gelu";  // mlp_block, transformer_block: relu or gelu
  std::string attention = "math";   // attention, transformer_block: math (explicit softmax(q k^T) v, keeps
                                    // the seq x seq scores) or flash (the fused kernel: keeps output and
                                    // logsumexp only); see SelfAttention in nn/layers/layers.h

  bool operator==(const LayerSpec&) const = default;
};

struct ModelSpec {
  // Which model source builds the net (nn/net_sources.h): "layers" builds `layers` below,
  // "torchscript" loads `torchscript`. The loader sets it from the key a scenario file writes.
  std::string source = "layers";
  DType dtype = DType::kFloat32;  // one of kModelDTypes (source "layers")
  std::vector<LayerSpec> layers;  // source "layers"
  // Source "torchscript": the module file (torch.jit.save), as the loader resolved it against the
  // scenario file's folder.
  std::string torchscript;

  bool operator==(const ModelSpec&) const = default;
};

// One input of a model's forward beyond the first (data.inputs[1:]; the first is DataSpec's own
// shape, dtype and vocab): token ids and an attention mask, say. Batched like the first.
struct InputSpec {
  std::vector<int64_t> shape;     // per sample
  DType dtype = DType::kFloat32;  // int64: ids from [0, vocab); bool: all true; floats: normal
  int64_t vocab = 0;

  bool operator==(const InputSpec&) const = default;
};

struct DataSpec {
  int64_t batch = 1;
  std::vector<int64_t> shape;           // per sample, e.g. [512] or [seq] for token ids
  DType dtype = DType::kFloat32;        // any DType; kInt64 is token ids
  int64_t vocab = 0;                    // int64 data: ids are drawn from [0, vocab)
  bool on_host = true;                  // the batch starts on the host and is transferred to the device
  int64_t classes = 0;                  // cross_entropy targets: [batch] ids in [0, classes)
  std::vector<InputSpec> extra_inputs;  // data.inputs[1:], for a forward that takes several

  bool operator==(const DataSpec&) const = default;
};

struct OptimizerSpec {
  std::string kind = "sgd";  // none sgd adam adamw
  double lr = 1e-3;
  double momentum = 0.0;  // sgd
  double weight_decay = 0.0;
  // A float32 master copy of what is stepped, with the state in float32, for a bfloat16 or float16
  // model (Note [Master weights], workload/loop/master_weights.h).
  bool master_weights = false;

  bool operator==(const OptimizerSpec&) const = default;
};

struct EvalSpec {
  int64_t batches = 0;  // 0: no evaluation
  bool no_grad = true;
  bool keep_outputs = false;  // keep every batch's output until the evaluation ends

  bool operator==(const EvalSpec&) const = default;
};

struct LossHistorySpec {
  std::string from = "train";  // train | eval: whose losses are kept
  std::string keep = "none";   // none | item (a double) | detached (a tensor) | attached (with its graph)

  bool operator==(const LossHistorySpec&) const = default;
};

struct LoopSpec {
  int64_t iterations = 2;
  std::string loss = "mean";  // mean (of the output) | mse (against a zero target) | cross_entropy
  bool backward = true;
  bool retain_graph = false;
  OptimizerSpec optimizer;
  std::string zero_grad = "none";  // none (set to none) | zero (fill with zeros)
  int64_t accumulate = 1;          // micro-batches per optimizer step
  EvalSpec eval;
  LossHistorySpec loss_history;
  // Mixed precision for the forward and the loss (train and eval), through at::autocast on the
  // backend's device type (nn/autocast/autocast.h): none | bfloat16 | float16 (with a GradScaler's loss scaling).
  std::string autocast = "none";
  double clip_grad_norm = 0;  // > 0: the max norm of torch::nn::utils::clip_grad_norm_ before each step

  bool operator==(const LoopSpec&) const = default;
};

struct InplaceSpec {
  std::string target = "none";  // none | output (of layer `layer`) | parameter (first parameter of `layer`)
  int64_t layer = 0;
  std::string op = "mul_";  // mul_ add_ (in place) or mul add (the out-of-place fix)

  bool operator==(const InplaceSpec&) const = default;
};

struct CheckpointSpec {
  int64_t segments = 0;  // 0: no activation checkpointing; else split the layers into N segments
  bool preserve_rng_state = true;

  bool operator==(const CheckpointSpec&) const = default;
};

struct PitfallSpec {
  InplaceSpec inplace;
  bool retain_grad = false;         // retain_grad() on every intermediate output (implies keeping them)
  bool keep_intermediates = false;  // keep every intermediate output until the iteration ends
  CheckpointSpec checkpoint;
  std::string transfer = "outside";  // outside | inside (the first checkpointed segment)

  bool operator==(const PitfallSpec&) const = default;
};

// One rank of a data-parallel or sharded run (Note [One simulated rank], workload/parallel/data_parallel.h):
// rank `rank` of `world`, simulated with c10d::FakeProcessGroup. world 1 (the default) is no
// parallelism at all: the loop as before.
struct ParallelSpec {
  int64_t world = 1;
  int64_t rank = 0;
  std::string strategy = "ddp";          // ddp | zero1 | zero2 | fsdp
  double bucket_cap_mb = 25;             // DDP's bucket_cap_mb; zero2's reduce-scatter buckets too
  bool gradient_as_bucket_view = false;  // ddp: gradients are views of the buckets (no copy)
  std::string unit = "layer";            // fsdp: "layer", "model" or a layer kind (Note [One FSDP2 rank])
  std::string init = "device";           // fsdp: "device" | "meta" (Note [Meta-device init])
  // fsdp: FSDP2's MixedPrecisionPolicy on a float32 model (Note [FSDP2 mixed precision],
  // workload/parallel/fully_sharded.h): the dtype of the all-gathered (unsharded) parameters and
  // gradients, and of the reduce-scatter. None: the model's dtype; reduce_dtype none with a
  // param_dtype reduces in param_dtype, as FSDP2 does.
  std::optional<DType> param_dtype;
  std::optional<DType> reduce_dtype;

  bool active() const { return world > 1; }
  bool operator==(const ParallelSpec&) const = default;
};

struct VariantSpec {
  std::string name;
  // A registered workload's name (oomguard/workload.h): it builds its own model, data and loop, and
  // reads `knobs`; model, data, pitfalls and loop (but loop.iterations) are unused. Empty: the layers.
  std::string workload = {};
  Knobs knobs = {};
  ModelSpec model = {};
  DataSpec data = {};
  LoopSpec loop = {};
  PitfallSpec pitfalls = {};
  ParallelSpec parallel = {};
  int64_t seed = 0;
  // This variant alone as a scenario file's text, written by the loader (Note [Parse once],
  // scenario/variant_resolution.h): what a spawned child parses. Empty for a spec made in code.
  std::string document = {};

  bool operator==(const VariantSpec&) const = default;
};

// Note [Whose kernels a check is for]
// A check's arithmetic is often one set of kernels' bytes: cpu's layer norm keeps bf16 statistics for
// a bf16 model, a card's keeps float ones; cpu's dropout keeps its noise in the model's dtype, a card's
// a 1-byte mask. Such a check is true of cpu's numbers and false of a card's (meta's `--kernels cuda`,
// or a GPU), which is a fact about the kernels, not a failure of the code measured. So a check may say
// whose kernels it is for: `{"kernels": "cpu", "check": "..."}` (scenarios/FORMAT.md). A run whose
// variants were measured with other kernels skips it with the reason, as it skips a relation naming a
// variant that --filter left out; a check that names no kernels holds on every kernels'. Kernels match
// by family: "cuda" is every card's CUDA kernels (meta's "cuda sm_75", a GPU's "cuda"). There is no
// per-card value: a check whose number depends on the card (a reduction's scratch grows with the SM
// count) is written as a bound that holds on each card the scenario is meant for.
inline constexpr const char* kCheckKernels[] = {"cpu", "cuda"};

// A check expression (scenario/check_expression.h) and whose kernels' numbers it states: empty for
// every kernels', else a kCheckKernels value (Note [Whose kernels a check is for]).
struct ScenarioCheck {
  std::string expression;
  std::string kernels;

  bool operator==(const ScenarioCheck&) const = default;
};

struct VariantExpectation {
  VariantOutcome outcome;             // pass | oom | error:<category>
  bool leak = false;                  // live bytes grow from iteration to iteration
  bool leak_stated = false;           // the file says "leak": a stated false needs 2 iterations to hold
  std::vector<ScenarioCheck> checks;  // check expressions on this variant: "peak <= 12MiB"
  std::optional<std::string> xfail;   // known to fail, with the reason: FAIL becomes XFAIL, PASS XPASS
  // The kinds the detectors must find, exactly, in any order ([]: none); absent: not checked.
  std::optional<std::vector<DiagnosisKind>> diagnoses;
};

// The back-of-the-envelope estimate a scenario's teach text states, which reports compare the
// measurement with (verdict/memory_estimate.h): parameters, gradients and Adam state at 4 + 4 + 8 bytes
// per parameter, activations at batch x seq x hidden x layers x dtype bytes x activation_factor.
struct EstimateSpec {
  double activation_factor = 0;
};

struct Scenario {
  std::string name;
  std::string summary;
  std::string teach;
  std::string file;  // where it was loaded from
  std::vector<std::string> backends = {"cpu"};
  std::string card;                                        // default card, or
  std::string cap;                                         // default cap (as written)
  std::vector<VariantSpec> variants;                       // in file order
  std::map<std::string, VariantExpectation> expectations;  // by variant name
  std::vector<ScenarioCheck> checks;                       // relations between variants (check_expression.h)
  // Not from the file: the variants a run's --filter SCENARIO/VARIANT left out (run/plan.h). They are
  // not in `variants`, and a check naming one is skipped, not failed.
  std::vector<std::string> left_out;
  std::optional<EstimateSpec> estimate;  // none: reports show no estimate
};

}  // namespace oomguard
