#include "fit/fit_search.h"

#include <algorithm>
#include <numeric>

#include "base/check.h"

namespace oomguard {

FitSearch::FitSearch(int64_t min_value, int64_t max_value, TrialFunction trial)
    : FitSearch(KnobValues::Integers(min_value, max_value), FitDirection::kLargestFitting, std::move(trial)) {
  OOMGUARD_CHECK(1 <= min_value && min_value <= max_value)
      << "FitSearch: needs 1 <= min <= max, got " << min_value << ".." << max_value;
}

FitSearch::FitSearch(KnobValues values, FitDirection direction, TrialFunction trial)
    : values_(values), direction_(direction), trial_(std::move(trial)) {
  OOMGUARD_CHECK(!values.empty()) << "FitSearch: no value to search";
}

bool FitSearch::Beyond(int64_t a, int64_t b) const {
  return direction_ == FitDirection::kLargestFitting ? a > b : a < b;
}

FitSearch::Bracket FitSearch::Known(int64_t cap_bytes) const {
  Bracket b;
  for (const auto& [value, peaks] : fit_peaks_) {
    if (peaks.verdict_bytes <= cap_bytes && (!b.fits || Beyond(value, *b.fits))) {
      b.fits = value;
      b.peak_bytes = peaks.verdict_bytes;
    }
  }
  // Only values beyond the fit bound it: a monotone knob has no fails on the fit's own side.
  auto nearest_fails = [&](int64_t value) {
    if ((!b.fits || Beyond(value, *b.fits)) && (!b.fails || Beyond(*b.fails, value))) b.fails = value;
  };
  for (const auto& [value, peaks] : fit_peaks_) {
    if (peaks.allocated_bytes > cap_bytes) nearest_fails(value);
  }
  for (const auto& [value, refused_cap] : oom_caps_) {
    if (refused_cap >= cap_bytes) nearest_fails(value);
  }
  return b;
}

// In values, low and high are the known outcomes either side of the change: a fit below an OOM for a
// growing peak, an OOM below a fit for a falling one.
std::optional<int64_t> FitSearch::NextProbe(const Bracket& b) const {
  const bool growing = direction_ == FitDirection::kLargestFitting;
  const std::optional<int64_t> low = growing ? b.fits : b.fails;
  const std::optional<int64_t> high = growing ? b.fails : b.fits;
  if (!low) {
    if (high && *high <= values_.first()) return std::nullopt;  // the outcome at the first value is known
    return values_.first();
  }
  if (!high) {
    if (*low >= values_.last()) return std::nullopt;  // the last value has the first one's outcome
    return values_.Doubled(*low);
  }
  return values_.Middle(*low, *high);
}

CardFit FitSearch::Fit(const FitTarget& target) {
  CardFit fit;
  fit.card = target.card;
  fit.cap_bytes = target.cap_bytes;
  while (error_.empty()) {
    const Bracket known = Known(target.cap_bytes);
    const std::optional<int64_t> probe = NextProbe(known);
    if (!probe) {
      if (direction_ == FitDirection::kLargestFitting) {
        fit.max_value = known.fits;
        fit.peak_bytes_at_max = known.fits ? known.peak_bytes : 0;
        fit.first_oom_value = known.fails;
      } else {
        fit.min_value = known.fits;
        fit.peak_bytes_at_min = known.fits ? known.peak_bytes : 0;
        fit.last_oom_value = known.fails;
      }
      return fit;
    }
    const Trial trial = trial_(*probe, target);
    ++fit.trials;
    ++trials_;
    switch (trial.outcome) {
      case Trial::Outcome::kFits:
        fit_peaks_[*probe] = {trial.peak_bytes, trial.allocated_peak_bytes.value_or(trial.peak_bytes)};
        break;
      case Trial::Outcome::kOom:
        oom_caps_[*probe] = std::max(oom_caps_[*probe], target.cap_bytes);
        break;
      case Trial::Outcome::kError:
        error_ = trial.error.empty() ? "error" : trial.error;
        break;
    }
  }
  fit.error = error_;
  return fit;
}

std::vector<CardFit> FitTargets(FitSearch& search, const std::vector<FitTarget>& targets,
                                const std::function<void(const CardFit&)>& on_done) {
  std::vector<size_t> order(targets.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return targets[a].cap_bytes > targets[b].cap_bytes; });
  std::vector<CardFit> fits(targets.size());
  for (size_t i : order) {
    fits[i] = search.Fit(targets[i]);
    if (on_done) on_done(fits[i]);
  }
  return fits;
}

}  // namespace oomguard
