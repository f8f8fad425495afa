// Options of `oomguard run`, and how the card/cap/fault flags become allocator Limits. A flag that a
// measuring child needs travels as a field of MeasureRequest (run/child_protocol.h).
//
// Error policy: ResolveLimits returns false with a one-line message for bad user input (unknown card,
// malformed size, bad fault spec); the CLI turns that into exit code 2.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "allocators/device_account.h"
#include "model/scenario.h"

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

// Builds the Limits for --card/--cap/--context/--inject. With neither --card nor --cap, uses
// default_card. Returns false and fills *error on bad input.
[[nodiscard]] bool ResolveLimits(const RunOptions& options, const std::string& default_card, Limits* limits,
                                 std::string* error);

// The limits one scenario runs under: --card/--cap from the command line win; else the scenario's own
// card or cap; else kDefaultCard. --context and --inject apply either way.
[[nodiscard]] bool ScenarioLimits(const RunOptions& options, const Scenario& scenario, Limits* limits,
                                  std::string* error);

}  // namespace oomguard
