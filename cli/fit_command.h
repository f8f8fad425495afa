// `oomguard fit SCENARIO`: for each card, the largest value of a knob (the batch size, or the sequence
// length) at which each variant of a scenario still fits the card's cap; with `--knob world` (or
// `--world`), the smallest world size at which one rank of each parallel variant fits (fit/fit_world.h).
//
//   oomguard fit forgotten-no-grad --cards t4,a10g --backend meta
//   oomguard fit llm-70b --world --cards h100-80gb,a100-80gb
//
// Trials run in this process (MeasureVariant under each card's limits), searched by fit_search.h; the
// table goes to `out`, progress to `err` (redrawn in place when `err` is std::cerr on a terminal).
// Exit codes (cli.h): 0 every search finished; 1 a variant's search stopped at an error, or a trial
// leaked (the message names the variant, the value and the bytes); 2 usage or input error: an unknown
// scenario, variant or card, a knob the scenario cannot vary (world: no variant with `parallel`), a bad
// size or range, or cpu caps larger
// than this host's available memory (cpu trials really allocate what they measure). A trial that runs
// past --timeout ends the fit at once with exit 1, naming the trial (Note [A trial that does not end],
// fit/fit_trial.h).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "fit/fit_trial.h"

namespace oomguard {

struct FitOptions {
  std::string scenario;               // a scenario name (looked up in `paths`), or a path to a .json file
  std::vector<std::string> paths;     // --paths: where names are looked up; empty: the built-in catalog
  std::vector<std::string> variants;  // --variant, repeatable; empty: every variant, in file order
  std::string knob = "batch";         // batch (data.batch) | seq (data.shape[0]) | world (fit/fit_world.h)
  std::vector<std::string> cards;     // --cards a,b: names or aliases as --card takes them
  std::vector<std::string> caps;      // --cap SIZE, repeatable; with no cards nor caps: every preset
  std::string backend = "auto";       // a backend's name, or auto (meta when the scenario lists it, else cpu)
  int64_t min_value = 1;
  int64_t max_value = 0;      // 0: 1048576, or kDefaultMaxWorld for world
  int64_t gpus_per_node = 0;  // world: the nodes' size (Note [World sizes a fit tries]); 0: kDefaultGpusPerNode
  int64_t iterations = 0;  // 0: each variant's own loop.iterations
  double timeout_seconds = 300;  // --timeout, per trial, as `run`'s per variant (Note [A trial that does not end])
  std::string json_path;   // --json FILE
  std::string verdict = "reserved";       // --verdict (Note [The verdict on reserved bytes], run/run_options.h)
  std::optional<std::string> alloc_conf;  // --alloc-conf; absent: the environment's
  std::string kernels;  // --kernels cpu|cuda, meta only (Note [Kernels of a meta run]); empty: cpu's
};

// `measure` is the seam tests use to make trials leak.
int FitCommand(const FitOptions& options, std::ostream& out, std::ostream& err,
               const MeasureFunction& measure = MeasureVariant);

}  // namespace oomguard
