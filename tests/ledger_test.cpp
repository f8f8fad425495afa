#include "allocators/ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

namespace oomguard {
namespace {

constexpr int64_t kNoLimit = Ledger::kUnlimited;

TEST(Ledger, CountsLivePeakAndTotals) {
  Ledger ledger;
  ASSERT_TRUE(ledger.TryCharge(100, kNoLimit));
  ASSERT_TRUE(ledger.TryCharge(250, kNoLimit));
  ledger.Release(100);
  ASSERT_TRUE(ledger.TryCharge(50, kNoLimit));
  LedgerStats stats = ledger.Snapshot();
  EXPECT_EQ(stats.live_bytes, 300);
  EXPECT_EQ(stats.peak_bytes, 350);
  EXPECT_EQ(stats.alloc_count, 3);
  EXPECT_EQ(stats.allocated_bytes_total, 400);
  EXPECT_EQ(stats.failed_count, 0);
}

TEST(Ledger, LimitAllowsExactlyTheBoundaryByte) {
  Ledger ledger;
  ASSERT_TRUE(ledger.TryCharge(60, 100));
  EXPECT_TRUE(ledger.TryCharge(40, 100));  // live == limit: allowed
  EXPECT_FALSE(ledger.TryCharge(1, 100));  // one byte more: refused, nothing charged
  LedgerStats stats = ledger.Snapshot();
  EXPECT_EQ(stats.live_bytes, 100);
  EXPECT_EQ(stats.peak_bytes, 100);
  EXPECT_EQ(stats.alloc_count, 2);
  EXPECT_EQ(stats.failed_count, 1);
}

TEST(Ledger, AtThePeakItKnowsWhichPhaseAllocatedTheLiveBytes) {
  Ledger ledger;
  int params = -1, saved = -1, scratch = -1, grad = -1, later = -1;
  ASSERT_TRUE(ledger.TryCharge(1000, kNoLimit, &params));  // setup
  ledger.SetPhase("forward");
  ASSERT_TRUE(ledger.TryCharge(400, kNoLimit, &saved));
  ASSERT_TRUE(ledger.TryCharge(600, kNoLimit, &scratch));
  ledger.Release(600, scratch);
  ledger.SetPhase("backward");
  ASSERT_TRUE(ledger.TryCharge(700, kNoLimit, &grad));  // the peak: 1000 + 400 + 700 = 2100
  ledger.Release(400, saved);
  ledger.SetPhase("optimizer");
  ASSERT_TRUE(ledger.TryCharge(300, kNoLimit, &later));  // 2000: below the peak, the copy stays
  EXPECT_EQ(params, 0);
  EXPECT_EQ(saved, scratch);
  EXPECT_NE(grad, saved);

  const LedgerStats stats = ledger.Snapshot();
  EXPECT_EQ(stats.peak_bytes, 2100);
  ASSERT_EQ(stats.peak_by_origin.size(), 3u);
  EXPECT_EQ(stats.peak_by_origin[0].phase, "setup");
  EXPECT_EQ(stats.peak_by_origin[0].peak_bytes, 1000);
  EXPECT_EQ(stats.peak_by_origin[1].phase, "forward");
  EXPECT_EQ(stats.peak_by_origin[1].peak_bytes, 400);
  EXPECT_EQ(stats.peak_by_origin[2].phase, "backward");
  EXPECT_EQ(stats.peak_by_origin[2].peak_bytes, 700);

  ledger.ResetStatistics();  // a new measurement starts from what is live now, by origin
  const LedgerStats reset = ledger.Snapshot();
  ASSERT_EQ(reset.peak_by_origin.size(), 3u);  // the phase entered since the reset first, then older ones
  EXPECT_EQ(reset.peak_by_origin[0].phase, "optimizer");
  EXPECT_EQ(reset.peak_by_origin[0].peak_bytes, 300);
  EXPECT_EQ(reset.peak_by_origin[1].phase, "setup");
  EXPECT_EQ(reset.peak_by_origin[2].phase, "backward");
  EXPECT_EQ(reset.peak_by_origin[2].peak_bytes, 700);
}

// Note [Epochs]: each allocation is booked under the epoch current when it was made, and refunded there
// whatever the epoch is when it is freed; the peak's origins are by phase, the epochs summed.
TEST(Ledger, EachAllocationIsBookedUnderItsPhaseAndEpoch) {
  Ledger ledger;
  ledger.SetPhase("forward");
  const int forward = ledger.phase_index();
  int first = -1, second = -1, third = -1;
  ASSERT_TRUE(ledger.TryCharge(100, kNoLimit, &first));  // epoch 0
  ledger.SetEpoch(2);
  ASSERT_TRUE(ledger.TryCharge(30, kNoLimit, &second));
  ledger.SetEpoch(1);
  ASSERT_TRUE(ledger.TryCharge(5, kNoLimit, &third));
  EXPECT_EQ(ledger.epoch(), 1);
  EXPECT_EQ(ledger.LiveBytesFrom(forward, 0), 100);
  EXPECT_EQ(ledger.LiveBytesFrom(forward, 1), 5);
  EXPECT_EQ(ledger.LiveBytesFrom(forward, 2), 30);
  const LedgerStats stats = ledger.Snapshot();
  ASSERT_EQ(stats.peak_by_origin.size(), 1u);
  EXPECT_EQ(stats.peak_by_origin[0].phase, "forward");
  EXPECT_EQ(stats.peak_by_origin[0].peak_bytes, 135);

  ledger.Release(30, second);  // freed in epoch 1, refunded to epoch 2
  EXPECT_EQ(ledger.LiveBytesFrom(forward, 2), 0);
  EXPECT_EQ(ledger.LiveBytesFrom(forward, 1), 5);
  EXPECT_EQ(ledger.LiveBytesFrom(ledger.phase_index(), 0), 100);
  EXPECT_EQ(ledger.live_bytes(), 105);
  EXPECT_NE(first, second);
  EXPECT_NE(second, third);
  EXPECT_LT(std::max({first, second, third}), Ledger::kMaxOrigins);
}

TEST(Ledger, PhasePeaksIncludeWhatWasLiveAtEntry) {
  Ledger ledger;
  ASSERT_TRUE(ledger.TryCharge(1000, kNoLimit));  // parameters, during setup
  ledger.SetPhase("forward");
  ASSERT_TRUE(ledger.TryCharge(400, kNoLimit));
  ASSERT_TRUE(ledger.TryCharge(600, kNoLimit));
  ledger.SetPhase("backward");
  ledger.Release(600);
  ASSERT_TRUE(ledger.TryCharge(300, kNoLimit));
  ledger.SetPhase("optimizer");
  ledger.Release(300);
  ledger.Release(400);
  ledger.SetPhase("forward");  // a second iteration's forward only raises the same phase's peak
  ASSERT_TRUE(ledger.TryCharge(1100, kNoLimit));

  LedgerStats stats = ledger.Snapshot();
  ASSERT_EQ(stats.phase_peaks.size(), 4u);
  EXPECT_EQ(stats.phase_peaks[0].phase, "setup");
  EXPECT_EQ(stats.phase_peaks[0].peak_bytes, 1000);
  EXPECT_EQ(stats.phase_peaks[1].phase, "forward");
  EXPECT_EQ(stats.phase_peaks[1].peak_bytes, 2100);
  EXPECT_EQ(stats.phase_peaks[2].phase, "backward");
  EXPECT_EQ(stats.phase_peaks[2].peak_bytes, 2000);
  EXPECT_EQ(stats.phase_peaks[3].phase, "optimizer");
  EXPECT_EQ(stats.phase_peaks[3].peak_bytes, 1700);
  EXPECT_EQ(stats.peak_bytes, 2100);
  EXPECT_EQ(stats.peak_phase, "forward");
  EXPECT_EQ(ledger.phase(), "forward");
}

TEST(Ledger, ResetStatisticsKeepsLiveBytes) {
  Ledger ledger;
  ledger.SetPhase("forward");
  ASSERT_TRUE(ledger.TryCharge(500, kNoLimit));
  ASSERT_TRUE(ledger.TryCharge(500, kNoLimit));
  ledger.Release(500);
  ledger.ResetStatistics();
  LedgerStats stats = ledger.Snapshot();
  EXPECT_EQ(stats.live_bytes, 500);
  EXPECT_EQ(stats.peak_bytes, 500);
  EXPECT_EQ(stats.alloc_count, 0);
  EXPECT_EQ(stats.allocated_bytes_total, 0);
  ASSERT_EQ(stats.phase_peaks.size(), 1u);
  EXPECT_EQ(stats.phase_peaks[0].phase, "forward");
  EXPECT_EQ(stats.phase_peaks[0].peak_bytes, 500);
  ledger.Release(500);
  EXPECT_EQ(ledger.live_bytes(), 0);
}

TEST(Ledger, TimelineMergesNeighboursKeepingTheHigherLiveBytes) {
  Ledger ledger;
  ledger.EnableTimeline(4);
  ledger.ResetStatistics();
  for (int64_t n : {10, 20, 30}) ASSERT_TRUE(ledger.TryCharge(n, kNoLimit));  // live 10, 30, 60
  ledger.SetPhase("backward");
  for (int64_t n : {30, 20, 10}) ledger.Release(n);  // live 30, 10, 0
  LedgerStats stats = ledger.Snapshot();
  // Four points filled at event 3 and merged pairwise: {0,0}+{1,10} -> {0,10}, {2,30}+{3,60} -> {2,60}.
  // Events 4-5 make one point of stride 2, and event 6 is the open bucket.
  ASSERT_EQ(stats.timeline.size(), 4u);
  EXPECT_EQ(stats.timeline_stride, 2);
  const std::vector<std::pair<int64_t, int64_t>> expected = {{0, 10}, {2, 60}, {4, 30}, {6, 0}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(stats.timeline[i].event_index, expected[i].first) << i;
    EXPECT_EQ(stats.timeline[i].live_bytes, expected[i].second) << i;
  }
  ASSERT_EQ(stats.phase_marks.size(), 2u);
  EXPECT_EQ(stats.phase_marks[0].event_index, 0);
  EXPECT_EQ(stats.phase_marks[0].phase, "setup");
  EXPECT_EQ(stats.phase_marks[1].event_index, 3);
  EXPECT_EQ(stats.phase_marks[1].phase, "backward");
}

// Frees in a ReleaseBatch (LibTorch's autocast cache, emptied in address order) are one timeline
// event at the batch's end, whatever their order; live bytes follow each free at once.
TEST(Ledger, FreesInAReleaseBatchAreOneTimelineEvent) {
  for (const std::vector<int64_t>& order : {std::vector<int64_t>{30, 20}, std::vector<int64_t>{20, 30}}) {
    Ledger ledger;
    ledger.EnableTimeline(64);
    ledger.ResetStatistics();
    for (int64_t n : {10, 20, 30}) ASSERT_TRUE(ledger.TryCharge(n, kNoLimit));  // live 10, 30, 60
    {
      Ledger::ReleaseBatch outer;
      {
        Ledger::ReleaseBatch nested;
        ledger.Release(order[0]);
      }
      ledger.Release(order[1]);
      EXPECT_EQ(ledger.live_bytes(), 10);
      EXPECT_EQ(ledger.Snapshot().timeline.size(), 4u);  // nothing yet: the outer batch is open
    }
    ledger.Release(10);
    const LedgerStats stats = ledger.Snapshot();
    const std::vector<std::pair<int64_t, int64_t>> expected = {{0, 0}, {1, 10}, {2, 30}, {3, 60}, {4, 10}, {5, 0}};
    ASSERT_EQ(stats.timeline.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(stats.timeline[i].event_index, expected[i].first) << i;
      EXPECT_EQ(stats.timeline[i].live_bytes, expected[i].second) << i;
    }
    EXPECT_EQ(stats.peak_bytes, 60);
  }
}

TEST(Ledger, TimelineIsOffByDefault) {
  Ledger ledger;
  ASSERT_TRUE(ledger.TryCharge(10, kNoLimit));
  EXPECT_TRUE(ledger.Snapshot().timeline.empty());
}

TEST(Ledger, ConcurrentChargesAndReleasesBalanceExactly) {
  Ledger ledger;
  ledger.EnableTimeline(64);
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&ledger, t] {
      const int64_t bytes = 8 * (t + 1);
      for (int i = 0; i < kRounds; ++i) {
        ASSERT_TRUE(ledger.TryCharge(bytes, kNoLimit));
        ledger.Release(bytes);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  LedgerStats stats = ledger.Snapshot();
  EXPECT_EQ(stats.live_bytes, 0);
  EXPECT_EQ(stats.alloc_count, kThreads * kRounds);
  EXPECT_EQ(stats.allocated_bytes_total, kRounds * (8 + 16 + 24 + 32));
  EXPECT_GE(stats.peak_bytes, 32);
  EXPECT_LE(stats.peak_bytes, 8 + 16 + 24 + 32);
  EXPECT_LE(stats.timeline.size(), 64u);
}

TEST(Ledger, ConcurrentChargesNeverExceedTheLimit) {
  Ledger ledger;
  constexpr int64_t kLimit = 1000;
  std::vector<std::thread> threads;
  std::atomic<int64_t> refused{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        if (ledger.TryCharge(300, kLimit)) {
          ledger.Release(300);
        } else {
          refused.fetch_add(1);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  LedgerStats stats = ledger.Snapshot();
  EXPECT_LE(stats.peak_bytes, kLimit);
  EXPECT_EQ(stats.live_bytes, 0);
  EXPECT_EQ(stats.failed_count, refused.load());
  EXPECT_EQ(stats.alloc_count + stats.failed_count, 4 * 20000);
}

}  // namespace
}  // namespace oomguard

namespace oomguard {
namespace {

TEST(Ledger, APhaseListenerHearsEachChangeBeforeItHappens) {
  Ledger ledger;
  std::vector<std::string> heard;
  ledger.SetPhaseListener([&](const std::string& ending, const std::string& starting) {
    heard.push_back(ending + ">" + starting + "@" + ledger.phase());
  });
  ledger.SetPhase("forward");
  ledger.SetPhase("backward");
  ledger.SetPhase("backward");  // the same phase again is still a call
  ledger.SetPhaseListener({});
  ledger.SetPhase("optimizer");
  EXPECT_EQ(heard, (std::vector<std::string>{"setup>forward@setup", "forward>backward@forward",
                                             "backward>backward@backward"}));
}

}  // namespace
}  // namespace oomguard
