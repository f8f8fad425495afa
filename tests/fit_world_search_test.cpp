// The fit search for a knob whose peak falls as it grows (--knob world), on synthetic peak functions,
// and the world sizes it tries: no LibTorch, exact answers and trial counts.
//
// The model peak(w) = 1000 + 720720 / w (720720 = lcm(1..16): exact for every w up to 16) is one
// rank's replicated bytes plus a sharded part. Over every integer, the search doubles 1, 2, 4, ... until
// 2^b fits, where b = bit_width(n - 1) for the answer n >= 2 (b + 1 trials), then bisects the gap
// (2^(b-1), 2^b) of width 2^(b-1) in b - 1 trials: 2 b trials in all, and 1 when world 1 fits.
#include <gtest/gtest.h>

#include <bit>
#include <vector>

#include "fit/fit_search.h"
#include "fit/fit_world.h"
#include "fit/knob_values.h"
#include "synthetic_trials.h"

namespace oomguard {
namespace {

int64_t ShardedPeak(int64_t w) { return 1000 + 720720 / w; }

using testing::SyntheticTrials;

int64_t TrialsOverIntegers(int64_t n) { return n == 1 ? 1 : 2 * std::bit_width(static_cast<uint64_t>(n - 1)); }

TEST(KnobValues, WorldSizesArePowersOfTwoBelowANodeThenWholeNodes) {
  const KnobValues world = KnobValues::Nodes(1, 4096, 8);
  std::vector<int64_t> below_100;
  for (int64_t v = 1; v < 100; ++v) {
    if (world.Contains(v)) below_100.push_back(v);
  }
  EXPECT_EQ(below_100, (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96}));
  EXPECT_EQ(world.first(), 1);
  EXPECT_EQ(world.last(), 4096);
  EXPECT_EQ(world.Doubled(4), 8);
  EXPECT_EQ(world.Doubled(24), 48);
  EXPECT_EQ(world.Middle(32, 64), 48);  // of 40, 48, 56
  EXPECT_EQ(world.Middle(16, 32), 24);
  EXPECT_EQ(world.Middle(8, 16), std::nullopt);  // neighbours
  EXPECT_EQ(world.Middle(1, 8), 2);              // of 2, 4
  // --min and --max round inwards to the sizes; the last value doubles to the last.
  const KnobValues inside = KnobValues::Nodes(3, 100, 8);
  EXPECT_EQ(inside.first(), 4);
  EXPECT_EQ(inside.last(), 96);
  EXPECT_EQ(inside.Doubled(64), 96);
  EXPECT_TRUE(KnobValues::Nodes(9, 15, 8).empty());
  // Four-GPU nodes; and per_node 1 is every integer, as the batch search's.
  EXPECT_EQ(KnobValues::Nodes(1, 64, 4).Middle(8, 32), 20);  // of 12, 16, 20, 24, 28
  const KnobValues every = KnobValues::Integers(1, 1000);
  EXPECT_TRUE(every.Contains(999));
  EXPECT_EQ(every.Middle(10, 17), 13);  // 10 + (17 - 10) / 2
  EXPECT_EQ(every.Doubled(600), 1000);
}

TEST(FitSearchWorld, FindsTheSmallestWorldOfAShardedPeakInTwoTrialsPerBit) {
  for (const int64_t n : {1, 2, 3, 5, 8, 9, 12, 16}) {
    for (const int64_t slack : {0, 1}) {  // the cap exactly at peak(n), and a byte over
      const int64_t cap = ShardedPeak(n) + slack;
      ASSERT_TRUE(n == 1 || ShardedPeak(n - 1) > cap);  // n - 1 does not fit: n is the answer
      SyntheticTrials trials(ShardedPeak);
      FitSearch search(KnobValues::Integers(1, 1048576), FitDirection::kSmallestFitting, trials.Function());
      const CardFit fit = search.Fit({"card", cap});
      EXPECT_EQ(fit.min_value, n) << "cap " << cap;
      EXPECT_EQ(fit.peak_bytes_at_min, ShardedPeak(n));
      EXPECT_EQ(fit.last_oom_value, n == 1 ? std::nullopt : std::optional<int64_t>(n - 1));
      EXPECT_EQ(fit.trials, TrialsOverIntegers(n)) << "n " << n;
      EXPECT_EQ(fit.trials, trials.calls);
      EXPECT_EQ(fit.max_value, std::nullopt);  // the growing knob's fields stay unset
      EXPECT_EQ(fit.first_oom_value, std::nullopt);
    }
  }
}

// Over the world sizes 1, 2, 4, 8, 16, 24, ...: the doubling reaches the first power of two 2^b >= n
// (b + 1 trials), and between 2^(b-1) and 2^b lie 2^(b-4) - 1 multiples of 8 for b >= 5, which the
// bisection halves in b - 4 trials (none for b <= 4: 4 and 8, 8 and 16 are neighbours).
TEST(FitSearchWorld, OnWorldSizesTheAnswerIsTheSmallestSizeThatFits) {
  SyntheticTrials trials(ShardedPeak);
  trials.peak = [](int64_t w) { return 1000 + 1000000000 / w; };
  const KnobValues world = KnobValues::Nodes(1, 4096, 8);
  for (const int64_t threshold : {1, 3, 9, 16, 17, 37, 100, 1000, 4000}) {
    const int64_t cap = trials.peak(threshold);  // every integer from `threshold` on fits
    int64_t n = threshold;
    while (!world.Contains(n)) ++n;  // 1, 4, 16, 16, 24, 40, 104, 1000, 4000
    const int64_t b = std::bit_width(static_cast<uint64_t>(n - 1));
    trials.calls = 0;
    FitSearch search(world, FitDirection::kSmallestFitting, trials.Function());
    const CardFit fit = search.Fit({"card", cap});
    EXPECT_EQ(fit.min_value, n) << "threshold " << threshold;
    EXPECT_EQ(fit.peak_bytes_at_min, trials.peak(n));
    EXPECT_EQ(fit.trials, n == 1 ? 1 : b + 1 + std::max<int64_t>(0, b - 4)) << "n " << n;
  }
  // Not even the last size fits: the doubling tries 1, 2, 4, ..., 4096 (13 trials) and stops there.
  FitSearch search(world, FitDirection::kSmallestFitting, trials.Function());
  const CardFit none = search.Fit({"card", trials.peak(4096) - 1});
  EXPECT_EQ(none.min_value, std::nullopt);
  EXPECT_EQ(none.peak_bytes_at_min, 0);
  EXPECT_EQ(none.last_oom_value, 4096);
  EXPECT_EQ(none.trials, 13);
  // And a smaller cap is then known not to fit any size without a trial.
  EXPECT_EQ(search.Fit({"smaller", 1000}).trials, 0);
}

// Note [Facts shared across caps], for a falling peak. The larger cap peak(5) runs first: 1, 2, 4 do
// not fit, 8 does, then 6 and 5 fit: 2 bit_width(4) = 6 trials. For the smaller cap peak(12) = 61060
// those facts leave no fit (8's peak, 91090, is over it) and 8 as the largest value refused (its peak
// is over the cap too); doubling 8 gives 16 (fits), then 12 (fits), 10 and 11 (do not): 4 trials,
// against 2 bit_width(11) = 8 alone.
TEST(FitSearchWorld, FactsFromTheLargerCapSaveTrialsForTheSmaller) {
  SyntheticTrials trials(ShardedPeak);
  FitSearch search(KnobValues::Integers(1, 1048576), FitDirection::kSmallestFitting, trials.Function());
  const std::vector<CardFit> fits = FitTargets(search, {{"small", ShardedPeak(12)}, {"large", ShardedPeak(5)}});
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_EQ(fits[0].card, "small");
  EXPECT_EQ(fits[0].min_value, 12);
  EXPECT_EQ(fits[0].last_oom_value, 11);
  EXPECT_EQ(fits[1].min_value, 5);
  EXPECT_EQ(fits[1].trials, 6);
  EXPECT_EQ(fits[0].trials, 4);
  EXPECT_EQ(search.trials(), 10);
  EXPECT_EQ(trials.caps_seen, (std::vector<int64_t>{ShardedPeak(5), ShardedPeak(12)}));  // largest first

  SyntheticTrials alone(ShardedPeak);
  FitSearch fresh(KnobValues::Integers(1, 1048576), FitDirection::kSmallestFitting, alone.Function());
  EXPECT_EQ(fresh.Fit({"small", ShardedPeak(12)}).trials, TrialsOverIntegers(12));  // 8
}

// Note [Reserved peaks across caps], for a falling peak: world w allocates a = 120000 / w, holds 1.5 a
// reserved when the cap does not bind, and fits any cap >= 1.2 a by releasing its cache (its reserved
// peak is then the cap). At cap 1500, w >= 96 fits (a = 1250). At cap 1200, w >= 120 (a = 1000). The
// larger cap's trial at 128 fit with reserved 1405 > 1200 but allocated 937 < 1200: no OOM at 1200
// (taken for one, the answer would have been above 128).
TEST(FitSearchWorld, AReservedPeakOverACapDoesNotProveAnOomThere) {
  const TrialFunction trial = [](int64_t w, const FitTarget& target) {
    const int64_t a = 120000 / w;
    Trial t;
    if (6 * a > 5 * target.cap_bytes) {
      t.outcome = Trial::Outcome::kOom;
    } else {
      t.peak_bytes = std::min<int64_t>(3 * a / 2, target.cap_bytes);
      t.allocated_peak_bytes = a;
    }
    return t;
  };
  FitSearch search(KnobValues::Integers(1, 1024), FitDirection::kSmallestFitting, trial);
  const std::vector<CardFit> fits = FitTargets(search, {{"small", 1200}, {"large", 1500}});
  EXPECT_EQ(fits[1].min_value, 96);
  EXPECT_EQ(fits[1].peak_bytes_at_min, 1500);
  EXPECT_EQ(fits[0].min_value, 120);
  EXPECT_EQ(fits[0].peak_bytes_at_min, 1200);
  EXPECT_EQ(fits[0].last_oom_value, 119);
}

// Note [A strategy whose peak does not fall]: ddp's search has one value, the first: one trial decides.
TEST(FitSearchWorld, ASearchOfOneSizeIsOneTrial) {
  SyntheticTrials trials(ShardedPeak);
  FitSearch search(KnobValues::Nodes(1, 1, 8), FitDirection::kSmallestFitting, trials.Function());
  const std::vector<CardFit> fits = FitTargets(search, {{"small", ShardedPeak(1) - 1}, {"large", ShardedPeak(1)}});
  EXPECT_EQ(fits[1].min_value, 1);
  EXPECT_EQ(fits[1].trials, 1);
  EXPECT_EQ(fits[0].min_value, std::nullopt);  // known from the larger cap's peak
  EXPECT_EQ(fits[0].last_oom_value, 1);
  EXPECT_EQ(fits[0].trials, 0);
}

// Note [Which ranks a world fit measures]: the world fits when both ranks do, with the larger peak.
TEST(FitWorldRanks, AWorldFitsWhenRankZeroAndTheLastFit) {
  EXPECT_EQ(MeasuredRanks(1), std::vector<int64_t>{0});
  EXPECT_EQ(MeasuredRanks(8), (std::vector<int64_t>{0, 7}));
  Trial first, last;
  first.peak_bytes = 900;
  first.allocated_peak_bytes = 700;
  first.warnings = {"w1"};
  first.steady_state = "from iteration 2";
  last.peak_bytes = 800;
  last.allocated_peak_bytes = 750;
  last.warnings = {"w1", "w2"};
  Trial both = CombineRankTrials({first, last});
  EXPECT_EQ(both.outcome, Trial::Outcome::kFits);
  EXPECT_EQ(both.peak_bytes, 900);
  EXPECT_EQ(both.allocated_peak_bytes, 750);
  EXPECT_EQ(both.warnings, (std::vector<std::string>{"w1", "w2"}));
  EXPECT_EQ(both.steady_state, "from iteration 2");
  last.outcome = Trial::Outcome::kOom;
  EXPECT_EQ(CombineRankTrials({first, last}).outcome, Trial::Outcome::kOom);
  first.allocated_peak_bytes.reset();  // a verdict on allocated bytes: none combined either
  EXPECT_EQ(CombineRankTrials({first}).allocated_peak_bytes, std::nullopt);
}

}  // namespace
}  // namespace oomguard
