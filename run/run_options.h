// Options of `oomguard run`, and how the card/cap/fault flags become allocator Limits.
//
// Error policy: ResolveLimits returns false with a one-line message for bad user input (unknown card,
// malformed size, bad fault spec); the CLI turns that into exit code 2.
#pragma once

#include <string>
#include <vector>

#include "allocators/device_account.h"

namespace oomguard {

struct RunOptions {
  std::vector<std::string> paths;        // scenario files or folders; empty: the built-in catalog
  std::string filter = "*";              // glob on scenario names
  std::string backend = "auto";          // cpu | meta | cuda | auto (cuda when a GPU is visible, else cpu)
  bool backend_given = false;            // --backend was on the command line (explain picks one otherwise)
  std::string card;                      // --card NAME (empty: scenario default, else kDefaultCard)
  std::string cap;                       // --cap SIZE (excludes --card)
  std::string context;                   // --context SIZE: override the modelled CUDA context
  std::vector<std::string> inject;       // --inject SPEC, any of them may fire
  int jobs = 1;
  int64_t iterations = 0;                // --iterations N (0: each variant's own loop.iterations)
  double timeout_seconds = 300;          // per variant
  std::string json_path;                 // --json FILE
  std::vector<std::string> reports;      // --report FORMAT=FILE (ReportFormatNames, reports/report_registry.h)
  std::string baselines_dir;             // --baselines DIR (default: baselines/ beside each scenario file)
  bool update_baselines = false;         // --update-baselines: rewrite what ran successfully
  bool strict = false;                   // --strict: a variant without a baseline fails
  std::string snapshot_dir;              // --snapshot-dir DIR: memory_viz snapshots of failing or OOM variants
  bool snapshot_all = false;             // --snapshot-all: of every variant
  bool model_cuda = false;               // --model-cuda: predict the CUDA caching allocator on cpu/meta
};

inline constexpr const char* kDefaultCard = "t4";

// Builds the Limits for --card/--cap/--context/--inject. With neither --card nor --cap, uses
// default_card. Returns false and fills *error on bad input.
[[nodiscard]] bool ResolveLimits(const RunOptions& options, const std::string& default_card, Limits* limits,
                                 std::string* error);

}  // namespace oomguard
