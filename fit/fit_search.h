// The search behind `oomguard fit`: the largest value of an integer knob (a batch size, a sequence
// length) at which a variant still fits a memory cap, or the smallest (a world size, whose per-rank
// peak falls as it grows), for several caps.
//
//   oomguard::FitSearch search(/*min_value=*/1, /*max_value=*/1 << 20,
//                              [&](int64_t value, const oomguard::FitTarget& target) {
//                                return MeasureSomehow(value, target.cap_bytes);  // a Trial
//                              });
//   std::vector<oomguard::CardFit> fits = oomguard::FitTargets(search, {{"t4", t4_cap}, {"a10g", a10g_cap}});
//
//   oomguard::FitSearch world(oomguard::KnobValues::Nodes(1, 4096, 8), oomguard::FitDirection::kSmallestFitting,
//                             trial);  // the smallest world size that fits each cap
//
// Method: values double from the first (min_value) until the outcome changes (a batch that does not
// fit, a world that does) or the last (max_value) is reached, then a binary search between the two
// values either side of the change. The peak is assumed monotone in the knob: non-decreasing for
// kLargestFitting, non-increasing for kSmallestFitting. Pure logic: the trial is injected, so tests
// drive it with a synthetic peak function.
//
// Note [Facts shared across caps]: a trial is deterministic, and the cap only decides whether an
// allocation is refused. So a trial at (value v, cap c) that fits with peak p proves that v fits every
// cap >= p, with peak p, and that v does not fit any cap < p (the allocation that reached p, or one
// before it, would be refused). An OOM at (v, c) proves an OOM at v, and at every larger value, for
// every cap <= c. One FitSearch keeps these facts for one variant; each cap starts from the bracket
// they give, and the largest cap goes first, since its OOMs bound every smaller cap.
// For a knob whose peak falls as it grows (kSmallestFitting), "larger" turns into "smaller" where it
// speaks of values: a fit at (v, c) with peak p proves that v and every larger value fit every cap
// >= p; an OOM at (v, c) proves an OOM at v and at every smaller value for every cap <= c. The caps'
// order stays: the largest cap's OOMs still bound every smaller cap.
//
// Note [Reserved peaks across caps]: under the verdict on reserved bytes the peak is the caching
// allocator's reserved peak, and a smaller cap can still fit: the allocator releases its cache and
// retries before it gives up. So a fit with reserved peak r and allocated peak a proves a fit at
// every cap >= r and an OOM only below a (the ledger refuses there whatever the cache); caps in
// [a, r) need a trial of their own. The same holds for a falling knob, with the fit's proof reaching
// the larger values and the OOM's the smaller ones (the direction above).
//
// Error policy: a trial that ends in neither a fit nor an OOM (an error outcome) stops the variant's
// search: that card and every later one carry the error, and no more trials run. Nothing here throws;
// exceptions from the trial function pass through unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fit/knob_values.h"
#include "model/fit_results.h"

namespace oomguard {

struct FitTarget {
  std::string card;  // a preset's key, or empty for a plain cap
  int64_t cap_bytes = 0;
};

struct Trial {
  enum class Outcome { kFits, kOom, kError };
  Outcome outcome = Outcome::kFits;
  int64_t peak_bytes = 0;  // kFits: the peak the verdict was on (reserved under --verdict reserved)
  // kFits: a cap below this refuses the value for sure (the ledger's allocated peak); absent:
  // peak_bytes. Note [Reserved peaks across caps].
  std::optional<int64_t> allocated_peak_bytes;
  std::string error;       // kError: what went wrong, as the report should show it
  // The measurement's warnings (a module's fixed train/eval modes, what meta does not mirror): a fit
  // on numbers the backend says are not cpu's must say so.
  std::vector<std::string> warnings;
  std::string steady_state;  // how the trial met the step that repeats (VariantMeasurement::steady_state)
  // kOom: where it ran out and what was live: "runs out of memory in setup, with 130.98 GiB live
  // (parameters 130.98 GiB) and 130.98 GiB more asked"; a world trial's starts with the rank ("rank 0 runs").
  std::string oom_detail;
};

// Runs the variant with the knob at `value` under the target's cap.
using TrialFunction = std::function<Trial(int64_t value, const FitTarget& target)>;

// Which way the peak moves as the knob grows, and so which end of the fitting values is searched.
enum class FitDirection {
  kLargestFitting,   // the peak grows with the knob (batch, seq): CardFit::max_value
  kSmallestFitting,  // the peak falls as the knob grows (world): CardFit::min_value
};

class FitSearch {
 public:
  // Every integer in [min_value, max_value], kLargestFitting. Requires 1 <= min_value <= max_value.
  FitSearch(int64_t min_value, int64_t max_value, TrialFunction trial);
  // The values of `values` (not empty), searched in `direction`.
  FitSearch(KnobValues values, FitDirection direction, TrialFunction trial);

  // The largest (kLargestFitting) or smallest (kSmallestFitting) fitting value for one cap, running
  // only the trials the known facts leave open.
  CardFit Fit(const FitTarget& target);

  int64_t trials() const { return trials_; }  // SUM: over every Fit so far

 private:
  struct Bracket {
    std::optional<int64_t> fits;   // the value known to fit the cap whose peak is the highest
    int64_t peak_bytes = 0;        // its peak
    std::optional<int64_t> fails;  // the nearest value beyond `fits`, the way the peak grows, known not to
  };
  // Whether the peak at `a` is at least the peak at `b` by the direction alone (a beyond b).
  bool Beyond(int64_t a, int64_t b) const;
  Bracket Known(int64_t cap_bytes) const;
  std::optional<int64_t> NextProbe(const Bracket& b) const;

  const KnobValues values_;
  const FitDirection direction_;
  TrialFunction trial_;
  struct Peaks {
    int64_t verdict_bytes = 0;    // fits every cap >= this
    int64_t allocated_bytes = 0;  // refused by every cap < this
  };
  std::map<int64_t, Peaks> fit_peaks_;  // value -> the peaks measured when it fit
  std::map<int64_t, int64_t> oom_caps_;   // value -> the largest cap it was refused at
  std::string error_;                     // the first error: the search is over
  int64_t trials_ = 0;
};

// Fits every target, largest cap first (Note [Facts shared across caps]), and returns the results in
// the order of `targets`. on_done, when given, is called as each target finishes, in search order.
std::vector<CardFit> FitTargets(FitSearch& search, const std::vector<FitTarget>& targets,
                                const std::function<void(const CardFit&)>& on_done = {});

}  // namespace oomguard
