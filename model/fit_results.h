// The results of `oomguard fit`, as data: what the search produces (fit_search.h) and the fit report
// renders (reports/fit_report.h). Plain types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace oomguard {

// One card (or plain --cap) a variant was fitted to.
struct CardFit {
  std::string card;  // the preset's key ("t4"), or empty for a plain --cap
  int64_t cap_bytes = 0;
  std::optional<int64_t> max_value;        // largest knob value that fits; absent: not even --min fits
  int64_t peak_bytes_at_max = 0;           // the peak measured at max_value (0 when absent)
  std::optional<int64_t> first_oom_value;  // smallest value known not to fit; absent: --max fits
  // A knob whose peak falls as it grows (--knob world), in place of the three above:
  std::optional<int64_t> min_value;       // smallest value that fits; absent: not even --max fits
  int64_t peak_bytes_at_min = 0;          // the peak measured at min_value (0 when absent)
  std::optional<int64_t> last_oom_value;  // largest value known not to fit; absent: --min fits
  int64_t trials = 0;                     // SUM: trials run for this card (facts reused from others are free)
  std::string error;                      // non-empty: the search stopped at an error (outcome and message)
};

struct VariantFit {
  std::string variant;
  std::vector<CardFit> cards;         // in the order the cards were asked for
  std::vector<std::string> warnings;  // its trials' warnings, each once, in the order first seen
  // How its trials met the step that repeats (Note [The step that repeats], workload/loop/steady_state.h),
  // as the first trial said: "2 iterations, not 1: adamw keeps state from its first step on, ...".
  std::string steady_state;
  // --knob world: the variant's parallel.strategy, and why its search was cut short, if it was ("ddp
  // replicates ...": only the first world size was tried).
  std::string strategy;
  std::string note;
  // --knob world, where a card has no world that fits: what ran out at the largest world searched, on
  // the largest cap a trial met it: "at world 4096 on h200 (cap 139.38 GiB) rank 0 runs out of memory
  // in setup, with ...".
  std::string why_none;
};

struct FitResults {
  std::string scenario;
  std::string backend;     // cpu | meta
  std::string knob;        // batch | seq | world
  std::string knob_field;  // what the knob sets in the scenario: "data.batch", "data.shape[0]", "parallel.world"
  // world: the smallest fitting value is searched, among the world sizes of Note [World sizes a fit
  // tries] (fit/knob_values.h) for nodes of gpus_per_node; the cards' min_value fields are set.
  bool smallest = false;
  int64_t gpus_per_node = 0;          // world: the nodes' size (1: every integer); 0 otherwise
  bool own_ranks = false;             // world: every variant a workload, each measured at its parallel.rank
  std::vector<std::string> left_out;  // world: the variants without `parallel`, not fitted
  int64_t min_value = 1;              // the first and last values searched (world: rounded to its sizes)
  int64_t max_value = 1;
  int64_t iterations = 0;  // 0: each variant's own loop.iterations
  double duration_ms = 0;
  std::vector<VariantFit> variants;
};

}  // namespace oomguard
