// Options of `oomguard run`, and how the card/cap/fault flags become allocator Limits. A flag that a
// measuring child needs travels as a field of MeasureRequest (run/child_protocol.h).
//
// Error policy: ResolveLimits returns false with a one-line message for bad user input (unknown card,
// malformed size, bad fault spec); the CLI turns that into exit code 2.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocators/caching_allocator_config.h"
#include "allocators/device_account.h"
#include "backends/meta/kernel_target.h"
#include "model/scenario.h"
#include "workload/workload.h"

namespace oomguard {

// One file a run writes, with the flag that asked for it ("--json r.json", "--report md=x.md").
struct OutputFile {
  std::string flag;
  std::string path;
};

struct RunOptions {
  std::vector<std::string> paths;   // scenario files or folders; empty: the built-in catalog
  std::string filter = "*";         // glob on scenario names; SCENARIO/VARIANT: and on variant names (run/plan.h)
  std::string backend = "auto";     // cpu | meta | cuda | auto (cuda when a GPU is visible, else cpu)
  bool backend_given = false;       // --backend was on the command line (explain picks one otherwise)
  std::string card;                 // --card NAME (empty: scenario default, else kDefaultCard)
  std::string cap;                  // --cap SIZE (excludes --card)
  std::string context;              // --context SIZE: override the modelled CUDA context
  std::vector<std::string> inject;  // --inject SPEC, any of them may fire
  int jobs = 1;
  int64_t iterations = 0;            // --iterations N (0: each variant's own loop.iterations)
  double timeout_seconds = 300;      // per variant
  std::string json_path;             // --json FILE
  std::vector<std::string> reports;  // --report FORMAT=FILE (ReportFormatNames, reports/report_registry.h)
  std::string baselines_dir;         // --baselines DIR (default: baselines/ beside each scenario file)
  bool update_baselines = false;     // --update-baselines: rewrite what ran successfully
  bool strict = false;               // --strict: a variant without a baseline fails
  std::string snapshot_dir;          // --snapshot-dir DIR: memory_viz snapshots of failing or OOM variants
  bool snapshot_all = false;         // --snapshot-all: of every variant
  bool model_cuda = false;           // --model-cuda: predict the CUDA caching allocator on cpu/meta
  // --kernels cpu|cuda (Note [Kernels of a meta run]); empty: not given, cpu's.
  std::string kernels;
  // --verdict: what a card's or cap's verdict judges on cpu/meta (Note [The verdict on reserved bytes]).
  std::string verdict = "reserved";  // reserved | allocated
  std::optional<std::string> alloc_conf;  // --alloc-conf TEXT; absent: the environment's (PYTORCH_ALLOC_CONF)
  bool diagnose = false;             // --diagnose: rerun each variant with the fix of each diagnosis applied
  // OOMGUARD_SPAWN_CHILDREN=1: every variant in a fresh process (exec), even where a warm fork would
  // do (Note [Warm children], run/runner.cpp); for comparing the two, or a platform where fork misbehaves.
  bool spawn_children = false;

  // `run` only: explain and fit name what they measure.
  std::optional<std::string> shard;  // --shard INDEX/COUNT: this job's part of the scenario files (base/shard.h)
  bool gtest_sharding = false;       // without --shard, GTEST_SHARD_INDEX and GTEST_TOTAL_SHARDS shard the run
  // --json and each --report as this shard writes them (filled by the CLI): the plan refuses a run
  // whose outputs would overwrite one of its inputs (run/output_collisions.h).
  std::vector<OutputFile> outputs;
};

inline constexpr const char* kDefaultCard = "t4";

// Note [The verdict on reserved bytes]
// On a GPU, set_per_process_memory_fraction caps the caching allocator's *reserved* bytes (segments of
// 2 or 20 MiB, 512-byte rounding, splitting, cache), so a step can OOM with its allocated peak well
// under the cap. So on cpu and meta every variant runs with a model of that allocator
// (allocators/cuda_model_feed.h) whose refusals are OOMs, as the GPU's would be: `--verdict reserved`,
// the default. `--verdict allocated` judges the ledger's allocated bytes alone, as before, for
// comparisons with older results; `--model-cuda` then still adds the model's prediction. The opt-out
// names what is judged rather than switching the model off (`--no-model-cuda`), since the model may
// still be wanted for its numbers. The verdict needs no flag with a card or a cap: every run has one
// (the scenario's or the default card).
inline constexpr const char* kVerdictReserved = "reserved";
inline constexpr const char* kVerdictAllocated = "allocated";

// Note [Kernels of a meta run]: `--kernels cuda` makes the Meta kernels mirror PyTorch's CUDA kernels
// (backends/meta/kernel_target.h, Note [Meta as a card]) at the compute capability of the run's card:
// --card, else the scenario's card, else kDefaultCard's, with that card's SM count (Note [A card's SM
// count in card mode], backends/meta/kernel_target.h). A plain cap names no card: such a run takes
// sm_80 and an A100's 108 SMs, and says so in each measurement's warnings. The default stays cpu's kernels, so a
// meta run reads what the cpu backend reads and every baseline holds. The flag is meta's alone: the cpu
// and cuda backends run their own kernels, and `--kernels` with them is a usage error.
inline constexpr const char* kKernelsCpu = "cpu";
inline constexpr const char* kKernelsCuda = "cuda";
inline constexpr int kCapOnlyComputeCapability = 80;

// A --kernels given with a backend other than meta (already resolved: "cpu", "cuda"): false with
// "--kernels cuda: only the meta backend mirrors other kernels (--backend cpu runs cpu's own)".
[[nodiscard]] bool CheckKernelsFlag(const std::string& kernels, const std::string& backend, std::string* error);

// The kernels one scenario's meta run mirrors (Note [Kernels of a meta run]); *warning is set when a
// cap without a card made it assume sm_80. False for an unknown card, with the lookup's message.
[[nodiscard]] bool ScenarioKernelTarget(const RunOptions& options, const Scenario& scenario, KernelTarget* target,
                                        std::string* warning, std::string* error);

// The model's use on cpu/meta for these options: kVerdict unless --verdict allocated, then kPredict
// with --model-cuda, else kOff.
ModelCuda ModelCudaFor(const std::string& verdict, bool model_cuda);

// The allocator settings the model gets: --alloc-conf, else the environment's
// (CachingAllocatorConfigFromEnvironment). Returns false on text the parser refuses, with its message
// after "--alloc-conf: " (`flag_name`: what the caller calls it) or "PYTORCH_ALLOC_CONF (from the
// environment): ". *text receives what was parsed (what a child is given).
[[nodiscard]] bool ResolveAllocConf(const std::optional<std::string>& flag, std::string* text,
                                    CachingAllocatorConfig* config, std::string* error,
                                    std::string_view flag_name = "--alloc-conf");

// Builds the Limits for --card/--cap/--context/--inject. With neither --card nor --cap, uses
// default_card. Returns false and fills *error on bad input.
[[nodiscard]] bool ResolveLimits(const RunOptions& options, const std::string& default_card, Limits* limits,
                                 std::string* error);

// The limits one scenario runs under: --card/--cap from the command line win; else the scenario's own
// card or cap; else kDefaultCard. --context and --inject apply either way.
[[nodiscard]] bool ScenarioLimits(const RunOptions& options, const Scenario& scenario, Limits* limits,
                                  std::string* error);

}  // namespace oomguard
