#include "fit/fit_search.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "base/check.h"

namespace oomguard {

FitSearch::FitSearch(int64_t min_value, int64_t max_value, TrialFunction trial)
    : min_value_(min_value), max_value_(max_value), trial_(std::move(trial)) {
  OOMGUARD_CHECK(1 <= min_value && min_value <= max_value)
      << "FitSearch: needs 1 <= min <= max, got " << min_value << ".." << max_value;
}

FitSearch::Bracket FitSearch::Known(int64_t cap_bytes) const {
  Bracket b;
  for (const auto& [value, peaks] : fit_peaks_) {
    if (peaks.verdict_bytes <= cap_bytes && (!b.fits || value > *b.fits)) {
      b.fits = value;
      b.peak_bytes = peaks.verdict_bytes;
    }
  }
  // Only values above the largest fit bound it: a monotone knob has no fails below its fits.
  const int64_t floor = b.fits.value_or(std::numeric_limits<int64_t>::min());
  auto lower_fails = [&](int64_t value) {
    if (value > floor && (!b.fails || value < *b.fails)) b.fails = value;
  };
  for (const auto& [value, peaks] : fit_peaks_) {
    if (peaks.allocated_bytes > cap_bytes) lower_fails(value);
  }
  for (const auto& [value, refused_cap] : oom_caps_) {
    if (refused_cap >= cap_bytes) lower_fails(value);
  }
  return b;
}

std::optional<int64_t> FitSearch::NextProbe(const Bracket& b) const {
  if (!b.fits) {
    if (b.fails && *b.fails <= min_value_) return std::nullopt;  // not even min fits
    return min_value_;
  }
  if (!b.fails) {
    if (*b.fits >= max_value_) return std::nullopt;  // max fits
    return *b.fits > max_value_ / 2 ? max_value_ : *b.fits * 2;
  }
  if (*b.fails - *b.fits <= 1) return std::nullopt;
  return *b.fits + (*b.fails - *b.fits) / 2;
}

CardFit FitSearch::Fit(const FitTarget& target) {
  CardFit fit;
  fit.card = target.card;
  fit.cap_bytes = target.cap_bytes;
  while (error_.empty()) {
    const Bracket known = Known(target.cap_bytes);
    const std::optional<int64_t> probe = NextProbe(known);
    if (!probe) {
      fit.max_value = known.fits;
      fit.peak_bytes_at_max = known.fits ? known.peak_bytes : 0;
      fit.first_oom_value = known.fails;
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
