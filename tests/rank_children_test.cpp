// The runner's side of real ranks without running any: the ranks' requests, one variant's evidence out
// of its ranks' ends (run/rank_children.h), and `--inject rank=R` (run/rank_inject.h).
#include "run/rank_children.h"

#include <gtest/gtest.h>

#include "baselines/baseline_diff.h"
#include "baselines/baseline_store.h"
#include "model/measurement_json.h"
#include "reports/rank_text.h"
#include "run/rank_inject.h"

namespace oomguard {
namespace {

VariantMeasurement Measured(VariantOutcome outcome, int64_t peak, const std::string& error = "") {
  VariantMeasurement m;
  m.outcome = outcome;
  m.error = error;
  m.ledger.peak_bytes = peak;
  m.parallel.emplace();
  m.parallel->world = 3;
  m.parallel->communication_bytes = peak / 2;
  return m;
}

RankEnd Ended(int64_t rank, std::optional<VariantMeasurement> m, bool by_runner = false, std::string exit = "") {
  RankEnd end;
  end.rank = rank;
  end.evidence.measurement = std::move(m);
  end.evidence.exit = std::move(exit);
  end.ended_by_runner = by_runner;
  return end;
}

TEST(RankChildren, CpuAndCudaRunRealRanksAndOnlyAboveWorldOne) {
  VariantSpec v;
  v.parallel.world = 2;
  EXPECT_TRUE(RunsRealRanks(TraitsOf(Backend::kCpu), v));
  EXPECT_FALSE(RunsRealRanks(TraitsOf(Backend::kMeta), v));
  EXPECT_TRUE(RunsRealRanks(TraitsOf(Backend::kCuda), v));
  v.parallel.world = 1;  // Note [Ranks need a GPU each]: world 1 is one process, on cuda:0 on cuda
  EXPECT_FALSE(RunsRealRanks(TraitsOf(Backend::kCpu), v));
  EXPECT_FALSE(RunsRealRanks(TraitsOf(Backend::kCuda), v));
}

TEST(RankChildren, OnCudaRankRRunsOnGpuRElsewhereEveryRankOnDeviceZero) {
  for (const int64_t rank : {0, 1, 3}) {
    EXPECT_EQ(RankDevice(TraitsOf(Backend::kCuda), rank), rank);
    EXPECT_EQ(RankDevice(TraitsOf(Backend::kCpu), rank), 0);
    EXPECT_EQ(RankDevice(TraitsOf(Backend::kMeta), rank), 0);
  }
}

TEST(RankChildren, RanksOnCudaNeedAGpuEachAndTheReasonSaysWhatRunsInstead) {
  const BackendTraits& cuda = TraitsOf(Backend::kCuda);
  EXPECT_EQ(RanksUnsupported(cuda, 2, 0),
            "needs 2 GPUs for NCCL ranks, this machine has 0 (--backend meta simulates one rank at any world; "
            "--backend cpu runs 2 real ranks on Gloo)");
  EXPECT_EQ(RanksUnsupported(cuda, 8, 1),
            "needs 8 GPUs for NCCL ranks, this machine has 1 (--backend meta simulates one rank at any world; "
            "--backend cpu runs 8 real ranks on Gloo)");
  EXPECT_EQ(RanksUnsupported(cuda, 2, 2), "");  // enough GPUs
  EXPECT_EQ(RanksUnsupported(cuda, 1, 0), "");  // world 1 is no ranks: Available decides
  // cpu's ranks share the host, meta simulates one: neither needs a device per rank.
  EXPECT_EQ(RanksUnsupported(TraitsOf(Backend::kCpu), 8, 0), "");
  EXPECT_EQ(RanksUnsupported(TraitsOf(Backend::kMeta), 8, 0), "");
}

TEST(RankChildren, EachRankHasItsOwnOutputOneStoreAndGloosTimeoutAtMost30s) {
  MeasureRequest request;
  request.out_path = "/s/3.json";
  const std::vector<MeasureRequest> r = RankRequests(request, "/s/3", 2, 300);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].out_path, "/s/3.rank0.json");
  EXPECT_EQ(r[1].out_path, "/s/3.rank1.json");
  EXPECT_EQ(r[1].ranks_store, "/s/3.store");
  EXPECT_EQ(r[0].ranks_store, r[1].ranks_store);
  EXPECT_EQ(r[1].rank, 1);
  EXPECT_EQ(r[0].ranks_timeout_ms, 30000);
  EXPECT_EQ(RankRequests(request, "/s/3", 2, 5)[0].ranks_timeout_ms, 5000);  // a shorter --timeout wins
}

TEST(RankChildren, AllPassingTheHeadlineRanksMeasurementCarriesEveryRank) {
  VariantEvidence e;
  e.name = "v";
  MergeRankEvidence({Ended(2, Measured(VariantOutcome::Pass(), 300)), Ended(0, Measured(VariantOutcome::Pass(), 100)),
                     Ended(1, Measured(VariantOutcome::Pass(), 200))},
                    3, 1, &e);
  ASSERT_TRUE(e.measurement.has_value());
  EXPECT_EQ(e.name, "v");
  EXPECT_EQ(e.measurement->ledger.peak_bytes, 200);  // rank 1's, the scenario's rank
  ASSERT_EQ(e.measurement->ranks.size(), 3u);
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(e.measurement->ranks[r].rank, r);
    EXPECT_EQ(e.measurement->ranks[r].peak_bytes, 100 * (r + 1));
    EXPECT_EQ(e.measurement->ranks[r].communication_bytes, 50 * (r + 1));
    EXPECT_TRUE(e.measurement->ranks[r].measured);
  }
  EXPECT_EQ(e.exit, "");
}

TEST(RankChildren, AnOomRankIsTheVariantsMeasurementNamedAndTheEndedSiblingsListed) {
  VariantEvidence e;
  MergeRankEvidence({Ended(1, Measured(VariantOutcome::Oom(), 50, "CPU out of memory")),
                     Ended(0, std::nullopt, true, "crashed with signal 9 (Killed)"),
                     Ended(2, std::nullopt, true, "crashed with signal 9 (Killed)")},
                    3, 0, &e);
  ASSERT_TRUE(e.measurement.has_value());
  EXPECT_EQ(e.measurement->outcome, VariantOutcome::Oom());
  EXPECT_EQ(e.measurement->error, "rank 1 of 3: CPU out of memory (the runner ended ranks 0, 2)");
  ASSERT_EQ(e.measurement->ranks.size(), 3u);
  EXPECT_TRUE(e.measurement->ranks[0].ended);
  EXPECT_FALSE(e.measurement->ranks[0].measured);
  EXPECT_EQ(e.measurement->ranks[2].error, "ended by the runner after rank 1 of 3 failed");
  EXPECT_EQ(e.measurement->ranks[1].peak_bytes, 50);
}

TEST(RankChildren, ARankThatOnlySawItsSiblingGoIsNotTheOneNamed) {
  VariantEvidence e;
  // Rank 0's gloo noticed first, but rank 1 was killed: rank 1 is named.
  MergeRankEvidence({Ended(0, Measured(VariantOutcome::Error(ErrorCategory::kError), 10,
                                       "[pair.cc:547] Connection closed by peer [127.0.0.1]:1234")),
                     Ended(1, std::nullopt, false, "crashed with signal 9 (Killed)")},
                    2, 0, &e);
  EXPECT_FALSE(e.measurement.has_value());
  EXPECT_EQ(e.exit, "rank 1 of 2: crashed with signal 9 (Killed) (rank 0 stopped in a collective without it)");
}

TEST(RankChildren, TheRanksEndedAndThoseThatStoppedOnTheirOwnAreBothSaid) {
  VariantEvidence e;
  // Rank 2 went OOM; rank 0 stopped in a collective on its own (workload/loop/variant_run.cpp's words for
  // it), rank 1 was ended by the runner after the grace (Note [Gangs of children]).
  MergeRankEvidence({Ended(0, Measured(VariantOutcome::Error(ErrorCategory::kError), 10,
                                       "a collective failed, a sibling rank gone: [pair.cc:547] Connection "
                                       "closed by peer")),
                     Ended(2, Measured(VariantOutcome::Oom(), 30, "CPU out of memory")),
                     Ended(1, std::nullopt, true, "crashed with signal 9 (Killed)")},
                    3, 0, &e);
  ASSERT_TRUE(e.measurement.has_value());
  EXPECT_EQ(e.measurement->error,
            "rank 2 of 3: CPU out of memory (the runner ended rank 1; rank 0 stopped in a collective without it)");
}

TEST(RankChildren, ARankThatMeasuredItsOwnFailureIsNamedBeforeOneThatDiedWithoutAMeasurement) {
  VariantEvidence e;
  // Seen in CI under load: rank 1's injected OOM ended its process; rank 0, waiting in a collective,
  // aborted on the closed connection and ended first. Rank 1's measured OOM is the variant's.
  MergeRankEvidence({Ended(0, std::nullopt, false, "crashed with signal 6 (Aborted)"),
                     Ended(1, Measured(VariantOutcome::Oom(), 10, "CPU out of memory (injected by oomguard)"))},
                    2, 0, &e);
  ASSERT_TRUE(e.measurement.has_value());
  EXPECT_EQ(e.measurement->error, "rank 1 of 2: CPU out of memory (injected by oomguard)");
}

TEST(RankChildren, RanksRoundTripTheResultsJsonAndAreAbsentWithoutThem) {
  VariantEvidence e;
  MergeRankEvidence({Ended(0, Measured(VariantOutcome::Pass(), 100)), Ended(1, Measured(VariantOutcome::Pass(), 300))},
                    2, 0, &e);
  e.measurement->ranks[1].phase_peaks = {{"forward", 250}, {"backward", 300}};
  e.measurement->ranks[1].iterations = {{300, 280, 90}};
  e.measurement->ranks[1].grad_bytes = 40;
  const nlohmann::json j = MeasurementToJson(*e.measurement);
  VariantMeasurement back;
  std::string error;
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(back.ranks[1].peak_bytes, 300);
  EXPECT_EQ(back.ranks[1].phase_peaks.at(1).phase, "backward");
  EXPECT_EQ(back.ranks[1].iterations.at(0).live_after_backward_bytes, 280);
  EXPECT_EQ(back.ranks[1].grad_bytes, 40);
  EXPECT_EQ(back.ranks[0].grad_bytes, std::nullopt);
  EXPECT_EQ(back.ranks[1].communication_bytes, 150);
  EXPECT_EQ(RankPeaksText(back), "rank 0 100 bytes, rank 1 300 bytes; highest: rank 1");
  back.ranks[0].peak_bytes = 300;
  EXPECT_EQ(RankPeaksText(back), "all 2 at 300 bytes");
  EXPECT_FALSE(MeasurementToJson(VariantMeasurement{}).contains("ranks"));  // one process: as before
}

TEST(RankChildren, TheBaselineHoldsEveryRanksPeakAndComparesRankByRank) {
  VariantEvidence e;
  MergeRankEvidence({Ended(0, Measured(VariantOutcome::Pass(), 100)), Ended(1, Measured(VariantOutcome::Pass(), 300))},
                    2, 0, &e);
  VariantMeasurement& m = *e.measurement;
  m.variant = "v";
  m.backend = "cpu";
  m.cap_bytes = 1000;
  BaselineFile file;
  file.scenario = "s";
  file.Put(EntryFromMeasurement(m));
  BaselineFile back;
  std::string error;
  ASSERT_TRUE(LoadBaselineText(SerializeBaselineFile(file), "s.json", &back, &error)) << error;
  ASSERT_EQ(back.entries.size(), 1u);
  EXPECT_EQ(back.entries[0].rank_peaks, (std::vector<int64_t>{100, 300}));
  m.ranks[1].peak_bytes = 301;  // rank 1 grew by a byte; the variant's own (rank 0's) peak did not
  const BaselineComparison c = CompareWithBaseline(back, "s.json", m);
  EXPECT_EQ(c.verdict, BaselineVerdict::kRegressed);
  EXPECT_EQ(BaselineFailures(c, false),
            (std::vector<std::string>{"regression: rank_peak[1] 301 bytes vs baseline 300 bytes (+1 bytes, +0.3%)"}));
  // One process or a simulated rank: no rank_peaks in the file, as before.
  EXPECT_EQ(SerializeBaselineFile(file).find("rank_peaks") != std::string::npos, true);
  file.entries[0].rank_peaks.clear();
  EXPECT_EQ(SerializeBaselineFile(file).find("rank_peaks"), std::string::npos);
}

TEST(RankInject, TheRankClauseIsSplitOffAndTheRestKeepsItsOrder) {
  std::optional<int64_t> rank;
  std::string rest, error;
  ASSERT_TRUE(SplitRankClause("phase=backward,rank=3,nth=5", &rank, &rest, &error)) << error;
  EXPECT_EQ(rank, 3);
  EXPECT_EQ(rest, "phase=backward,nth=5");
  ASSERT_TRUE(SplitRankClause("nth=5", &rank, &rest, &error));
  EXPECT_EQ(rank, std::nullopt);
  EXPECT_EQ(rest, "nth=5");
  EXPECT_FALSE(SplitRankClause("rank=-1,nth=5", &rank, &rest, &error));
  EXPECT_EQ(error, "invalid fault spec 'rank=-1,nth=5': rank must be a whole number >= 0, got '-1'");
  EXPECT_FALSE(SplitRankClause("rank=1,rank=2,nth=5", &rank, &rest, &error));
  EXPECT_EQ(error, "invalid fault spec 'rank=1,rank=2,nth=5': rank is given twice");
}

TEST(RankInject, ARankGetsItsOwnSpecsAndThoseForEveryRank) {
  const std::vector<std::string> specs = {"rank=1,nth=3", "min-size=1GiB", "rank=0,p=0.5"};
  EXPECT_EQ(InjectionForRank(specs, 1), (std::vector<std::string>{"nth=3", "min-size=1GiB"}));
  EXPECT_EQ(InjectionForRank(specs, 0), (std::vector<std::string>{"min-size=1GiB", "p=0.5"}));
  EXPECT_EQ(InjectionForRank(specs, 2), (std::vector<std::string>{"min-size=1GiB"}));
}

TEST(RankInject, ASpecForARankThatDoesNotRunIsAWarning) {
  const std::vector<std::string> specs = {"rank=5,nth=3", "min-size=1GiB", "rank=3,p=0.5"};
  EXPECT_EQ(InjectionForNoRank(specs, 4),
            (std::vector<std::string>{"--inject rank=5,nth=3: this variant has ranks 0..3 (world 4): nothing was injected"}));
  EXPECT_EQ(InjectionForNoRank(specs, 1),
            (std::vector<std::string>{"--inject rank=5,nth=3: this variant has rank 0 only (no parallel): nothing was injected",
                                      "--inject rank=3,p=0.5: this variant has rank 0 only (no parallel): nothing was injected"}));
  EXPECT_TRUE(InjectionForNoRank(specs, 8).empty());
}

}  // namespace
}  // namespace oomguard
