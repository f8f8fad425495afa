// Trials of a deterministic peak function for the fit search's tests: a value fits a cap when its
// peak is within it. Counts the calls and records the caps seen, in order. No LibTorch.
//
//   testing::SyntheticTrials trials([](int64_t k) { return 1000 + 300 * k; });
//   FitSearch search(1, 1048576, trials.Function());
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "fit/fit_search.h"

namespace oomguard::testing {

struct SyntheticTrials {
  explicit SyntheticTrials(std::function<int64_t(int64_t)> peak_of) : peak(std::move(peak_of)) {}

  std::function<int64_t(int64_t)> peak;
  int64_t calls = 0;
  std::vector<int64_t> caps_seen;

  TrialFunction Function() {
    return [this](int64_t value, const FitTarget& target) {
      ++calls;
      if (caps_seen.empty() || caps_seen.back() != target.cap_bytes) caps_seen.push_back(target.cap_bytes);
      Trial t;
      const int64_t p = peak(value);
      if (p <= target.cap_bytes) {
        t.peak_bytes = p;
      } else {
        t.outcome = Trial::Outcome::kOom;
      }
      return t;
    };
  }
};

}  // namespace oomguard::testing
