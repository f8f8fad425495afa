// The fit search on synthetic peak functions: no LibTorch, no allocator, exact answers and trial counts.
//
// The linear model peak(k) = 1000 + 300 k fits cap c up to k = floor((c - 1000) / 300). From min 1, the
// search doubles 1, 2, 4, ... until 2^b fails, where b = bit_width(n) (b + 1 trials), then bisects the
// gap (2^(b-1), 2^b) of width 2^(b-1) in b - 1 trials: 2 b trials in all for one cap.
#include "fit/fit_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "synthetic_trials.h"

namespace oomguard {
namespace {

int64_t LinearPeak(int64_t k) { return 1000 + 300 * k; }

using testing::SyntheticTrials;

TEST(FitSearch, FindsTheLargestValueOfALinearPeakInTwoTrialsPerBit) {
  for (const int64_t n : {1, 2, 3, 7, 8, 100, 127, 128, 1000, 12345}) {
    for (const int64_t slack : {0, 1, 299}) {  // the cap exactly at peak(n), a byte over, a byte short of n + 1
      const int64_t cap = LinearPeak(n) + slack;
      ASSERT_EQ((cap - 1000) / 300, n);
      SyntheticTrials trials(LinearPeak);
      FitSearch search(1, 1048576, trials.Function());
      const CardFit fit = search.Fit({"card", cap});
      EXPECT_EQ(fit.max_value, n) << "cap " << cap;
      EXPECT_EQ(fit.peak_bytes_at_max, LinearPeak(n));
      EXPECT_EQ(fit.first_oom_value, n + 1);
      EXPECT_EQ(fit.trials, 2 * std::bit_width(static_cast<uint64_t>(n))) << "n " << n;
      EXPECT_EQ(fit.trials, trials.calls);
      EXPECT_TRUE(fit.error.empty());
    }
  }
}

TEST(FitSearch, NothingFitsWhenMinDoesNot) {
  SyntheticTrials trials(LinearPeak);
  FitSearch search(5, 1000, trials.Function());
  const CardFit fit = search.Fit({"t4", LinearPeak(5) - 1});
  EXPECT_EQ(fit.max_value, std::nullopt);
  EXPECT_EQ(fit.peak_bytes_at_max, 0);
  EXPECT_EQ(fit.first_oom_value, 5);
  EXPECT_EQ(fit.trials, 1);
  // A smaller cap is then known not to fit min without a trial.
  EXPECT_EQ(search.Fit({"smaller", 1500}).trials, 0);
}

TEST(FitSearch, MaxFitsAfterDoublingUpToIt) {
  SyntheticTrials trials(LinearPeak);
  FitSearch search(1, 1000, trials.Function());
  const CardFit fit = search.Fit({"h200", int64_t{1} << 40});
  EXPECT_EQ(fit.max_value, 1000);
  EXPECT_EQ(fit.peak_bytes_at_max, LinearPeak(1000));
  EXPECT_EQ(fit.first_oom_value, std::nullopt);
  EXPECT_EQ(fit.trials, 11);  // 1, 2, 4, ..., 512, then 1000 (not 1024)
  FitSearch single(7, 7, trials.Function());
  EXPECT_EQ(single.Fit({"h200", int64_t{1} << 40}).trials, 1);
}

// Note [Facts shared across caps]: the largest cap (n = 100) runs first, in 2 * bit_width(100) = 14
// trials (1..128, then 96 112 104 100 102 101). For n = 50 its facts give 32 (peak 10600) as a fit and
// 64 (peak 20200 > cap) as a fail; bisecting (32, 64) takes 48 56 52 50 51: 5 trials, against 12 alone.
TEST(FitSearch, FactsFromOneCapSaveTrialsForTheNext) {
  SyntheticTrials trials(LinearPeak);
  FitSearch search(1, 1048576, trials.Function());
  const std::vector<CardFit> fits = FitTargets(search, {{"small", LinearPeak(50)}, {"large", LinearPeak(100)}});
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_EQ(fits[0].card, "small");  // results in the order asked for
  EXPECT_EQ(fits[0].max_value, 50);
  EXPECT_EQ(fits[1].max_value, 100);
  EXPECT_EQ(fits[1].trials, 14);
  EXPECT_EQ(fits[0].trials, 5);
  EXPECT_EQ(search.trials(), 19);
  EXPECT_EQ(trials.caps_seen, (std::vector<int64_t>{LinearPeak(100), LinearPeak(50)}));  // largest first

  SyntheticTrials alone(LinearPeak);
  FitSearch fresh(1, 1048576, alone.Function());
  EXPECT_EQ(fresh.Fit({"small", LinearPeak(50)}).trials, 2 * std::bit_width(50u));  // 12
}

// After the largest cap (2 b trials), every power of two up to its answer has a measured peak, so each
// other cap starts inside (2^(b-1), 2^b] for its own b and bisects in at most b - 1 trials.
TEST(FitSearch, SixteenCapsCostFewerTrialsThanSixteenSearches) {
  std::vector<FitTarget> targets;
  int64_t alone_total = 0, shared_bound = 0;
  for (int64_t i = 0; i < 16; ++i) {
    const int64_t n = 3000 + 7919 * i;  // spread over several powers of two; the last is the largest
    const int64_t bits = std::bit_width(static_cast<uint64_t>(n));
    targets.push_back({"card" + std::to_string(i), LinearPeak(n) + i});
    alone_total += 2 * bits;
    shared_bound += i == 15 ? 2 * bits : bits - 1;
  }
  SyntheticTrials trials(LinearPeak);
  FitSearch search(1, 1048576, trials.Function());
  const std::vector<CardFit> fits = FitTargets(search, targets);
  for (size_t i = 0; i < fits.size(); ++i) {
    const int64_t n = 3000 + 7919 * static_cast<int64_t>(i);
    EXPECT_EQ(fits[i].max_value, n);
    const int64_t bits = std::bit_width(static_cast<uint64_t>(n));
    EXPECT_LE(fits[i].trials, i == 15 ? 2 * bits : bits - 1) << "card " << i;
  }
  EXPECT_EQ(search.trials(), trials.calls);
  EXPECT_LE(search.trials(), shared_bound);
  EXPECT_LT(shared_bound, alone_total * 6 / 10);
}

// Allocations rounded up to 4 KiB pages: plateaus where many values share a peak.
TEST(FitSearch, PlateausGiveTheLargestValueOfThePlateau) {
  SyntheticTrials trials(LinearPeak);
  trials.peak = [](int64_t k) { return 4096 * ((k * 100 + 4095) / 4096); };
  for (const int64_t cap : {4096, 8192, 100000, 1000000}) {
    int64_t expected = 0;
    while (trials.peak(expected + 1) <= cap) ++expected;
    FitSearch search(1, 1048576, trials.Function());
    const CardFit fit = search.Fit({"card", cap});
    EXPECT_EQ(fit.max_value, expected) << "cap " << cap;
    EXPECT_EQ(fit.first_oom_value, expected + 1);
  }
}

TEST(FitSearch, AnErrorStopsTheVariantsSearch) {
  int64_t calls = 0;
  FitSearch search(1, 1048576, [&](int64_t value, const FitTarget&) {
    ++calls;
    Trial t;
    if (value >= 8) {
      t.outcome = Trial::Outcome::kError;
      t.error = "at batch 8: error:meta-kernel-missing: no kernel";
    }
    return t;
  });
  const std::vector<CardFit> fits = FitTargets(search, {{"t4", 100}, {"h200", 1000}});
  EXPECT_EQ(fits[1].error, "at batch 8: error:meta-kernel-missing: no kernel");
  EXPECT_EQ(fits[1].trials, 4);  // 1 2 4 8
  EXPECT_EQ(fits[1].max_value, std::nullopt);
  EXPECT_EQ(fits[0].error, fits[1].error);
  EXPECT_EQ(fits[0].trials, 0);
  EXPECT_EQ(calls, 4);
}

// Note [Reserved peaks across caps]: a synthetic caching allocator whose value k allocates 100 k
// bytes, holds 150 k reserved when the cap does not bind, and fits any cap >= 120 k by releasing
// its cache (its reserved peak is then the cap). At cap 1500: 12 fits (reserved 1500). At cap 1200
// the facts from 1500 say 8 fits (reserved 1200), and 13 fails (an OOM at a larger cap), but 9..12,
// whose reserved peaks passed 1200 and allocated peaks did not, are left to trials: 10 fits. Judged
// on reserved peaks alone, they would have been taken for failures: 8.
TEST(FitSearch, AReservedPeakOverACapDoesNotProveAnOomThere) {
  const TrialFunction trial = [](int64_t k, const FitTarget& target) {
    Trial t;
    if (120 * k > target.cap_bytes) {
      t.outcome = Trial::Outcome::kOom;
    } else {
      t.peak_bytes = std::min<int64_t>(150 * k, target.cap_bytes);
      t.allocated_peak_bytes = 100 * k;
    }
    return t;
  };
  FitSearch search(1, 1024, trial);
  const std::vector<CardFit> fits = FitTargets(search, {{"small", 1200}, {"large", 1500}});
  EXPECT_EQ(fits[1].max_value, 12);
  EXPECT_EQ(fits[1].peak_bytes_at_max, 1500);
  EXPECT_EQ(fits[0].max_value, 10);
  EXPECT_EQ(fits[0].peak_bytes_at_max, 1200);
  EXPECT_EQ(fits[0].first_oom_value, 11);
}

}  // namespace
}  // namespace oomguard
