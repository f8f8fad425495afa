// The flags `run`, `explain` and `fit` share, declared once so every command spells them alike (a
// measuring child gets its own from run/child_protocol.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "run/run_options.h"

namespace oomguard {

// What --backend takes: every backend's name, and the request "auto".
std::vector<std::string> BackendChoices();

// "cpu, meta, cuda, or auto".
std::string BackendChoicesText();

// --backend, --card/--cap, --context, --inject, --iterations, --snapshot-dir/--snapshot-all, --verdict,
// --alloc-conf, --model-cuda.
void AddRunFlags(CLI::App* app, RunOptions* options);

// --verdict reserved|allocated and --alloc-conf TEXT (Note [The verdict on reserved bytes],
// run/run_options.h): `run`, `explain` and `fit`.
void AddVerdictFlags(CLI::App* app, std::string* verdict, std::optional<std::string>* alloc_conf);

// --kernels cpu|cuda: whose kernels a meta run mirrors (Note [Kernels of a meta run], run/run_options.h):
// `run`, `explain` and `fit`.
void AddKernelsFlag(CLI::App* app, std::string* kernels);

// A number in [min, max], as CLI::Range checks it, that also refuses nan and inf (which every comparison
// in CLI::Range lets through: "--timeout nan" would turn the timeout off).
CLI::Validator FiniteRange(double min, double max);

// --timeout SECONDS: how long one variant (`run`) or one trial (`fit`) may take; both default to 300.
void AddTimeoutFlag(CLI::App* app, double* seconds);

// --shard INDEX/COUNT, and GoogleTest's sharding variables when it is not given: `run` only, since
// explain and fit name what they measure.
void AddShardFlag(CLI::App* app, RunOptions* options);

}  // namespace oomguard
