// The plan of a run: which files run, and for the others the code and reason they get, without a
// child process (run/plan.h).
#include "run/plan.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>

#include "model/backend.h"
#include "run/rank_children.h"
#include "scratch_folder.h"
#include "tests/scoped_environment.h"

namespace oomguard {
namespace {

std::string Tiny(const std::string& name, const std::string& extra = "") {
  return R"({"name": ")" + name + R"(", "summary": "tiny",)" + extra + R"(
  "model": {"layers": [{"kind": "linear", "in": 4, "out": 2}]},
  "data": {"batch": 3, "shape": [4]},
  "loop": {"iterations": 2, "loss": "mean", "optimizer": {"kind": "sgd"}},
  "variants": {"base": {}}})";
}

bool Everywhere(const std::string&, std::string*) { return true; }

// The files of a plan, in its order.
std::vector<std::string> Files(const RunPlan& plan) {
  std::vector<std::string> files;
  for (const PlannedScenario& p : plan.scenarios) files.push_back(p.result.file);
  return files;
}

// "shard 2/3: 6 of 17, 17 selected".
std::string Tally(const ShardTally& t) {
  return "shard " + ShardName(t.shard) + ": " + std::to_string(t.files) + " of " + std::to_string(t.run_files) + ", " +
         std::to_string(t.selected_run_files) + " selected";
}

class PlanTest : public ::testing::Test {
 protected:
  RunPlan FullPlan(RunOptions options, const BackendCheck& available = Everywhere) {
    if (options.paths.empty()) options.paths = {folder_.path()};
    RunPlan plan;
    std::string error;
    EXPECT_TRUE(PlanRun(options, "cpu", available, &plan, &error)) << error;
    return plan;
  }
  std::vector<PlannedScenario> Plan(RunOptions options, const BackendCheck& available = Everywhere) {
    return FullPlan(std::move(options), available).scenarios;
  }
  RunOptions Sharded(const std::string& shard, const std::string& filter = "*") {
    RunOptions options;
    options.shard = shard;
    options.filter = filter;
    return options;
  }
  // "name CODE error" per planned scenario ("name runs" for one that runs).
  std::vector<std::string> Summary(const std::vector<PlannedScenario>& plan) {
    std::vector<std::string> lines;
    for (const PlannedScenario& p : plan) {
      lines.push_back(p.result.name + (p.runs ? " runs"
                                              : " " + std::string(ResultName(p.result.code)) + " " +
                                                    p.result.error.substr(0, p.result.error.find(dir_))));
    }
    return lines;
  }
  testing::ScratchFolder folder_{"plan"};
  const std::string dir_ = folder_.path();
};

TEST_F(PlanTest, WithoutAFilterNothingIsSkipped) {
  folder_.Write("a.json", Tiny("alpha"));
  folder_.Write("b.json", Tiny("beta"));
  const std::vector<PlannedScenario> plan = Plan(RunOptions{});
  EXPECT_EQ(Summary(plan), (std::vector<std::string>{"alpha runs", "beta runs"}));
  EXPECT_EQ(plan[0].result.file, dir_ + "/a.json");
  EXPECT_EQ(plan[0].result.summary, "tiny");
  EXPECT_EQ(plan[0].result.backend, "cpu");
  EXPECT_EQ(plan[0].result.card, "NVIDIA T4 16GB");
  EXPECT_EQ(plan[0].scenario.variants.size(), 1u);
}

TEST_F(PlanTest, WhatTheFilterDoesNotSelectIsSkippedWithTheReason) {
  folder_.Write("a.json", Tiny("alpha"));
  folder_.Write("b.json", Tiny("beta"));
  folder_.Write("c_broken.json", "{");
  folder_.Write("d.json", Tiny("beta"));  // a duplicate of a skipped name is no duplicate
  RunOptions options;
  options.filter = "a*";
  EXPECT_EQ(Summary(Plan(options)),
            (std::vector<std::string>{"alpha runs", "beta SKIPPED not selected by --filter 'a*'",
                                      "c_broken SKIPPED not selected by --filter 'a*'",
                                      "beta SKIPPED not selected by --filter 'a*'"}));
  options.filter = "b*";
  EXPECT_EQ(Summary(Plan(options)),
            (std::vector<std::string>{"alpha SKIPPED not selected by --filter 'b*'", "beta runs",
                                      "c_broken SKIPPED not selected by --filter 'b*'", "beta UNRESOLVED "}));
}

// --filter SCENARIO/VARIANT: the scenario runs with the variants that match, the others named as left
// out; a scenario none of whose variants match is skipped, saying which it has.
TEST_F(PlanTest, AFilterWithASlashPicksVariantsToo) {
  std::string alpha = Tiny("alpha");
  alpha.replace(alpha.find(R"("base": {})"), 10,
                R"("pitfall": {}, "pitfall_big": {"data": {"batch": 6}}, "fixed": {})");
  folder_.Write("a.json", alpha);
  folder_.Write("b.json", Tiny("beta"));
  RunOptions options;
  options.filter = "*/pitfall*";
  std::vector<PlannedScenario> plan = Plan(options);
  EXPECT_EQ(Summary(plan), (std::vector<std::string>{"alpha runs",
                                                     "beta SKIPPED not selected by --filter "
                                                     "'*/pitfall*' (no variant matches 'pitfall*'; "
                                                     "its variants: base)"}));
  ASSERT_EQ(plan[0].scenario.variants.size(), 2u);
  EXPECT_EQ(plan[0].scenario.variants[0].name, "pitfall");
  EXPECT_EQ(plan[0].scenario.variants[1].name, "pitfall_big");
  EXPECT_EQ(plan[0].scenario.left_out, std::vector<std::string>{"fixed"});
  options.filter = "alpha";  // no slash: every variant
  plan = Plan(options);
  EXPECT_EQ(plan[0].scenario.variants.size(), 3u);
  EXPECT_TRUE(plan[0].scenario.left_out.empty());
}

TEST_F(PlanTest, WhatCannotRunIsUnresolvedOrUnsupported) {
  folder_.Write("a.json", Tiny("alpha"));
  folder_.Write("b.json", Tiny("alpha"));
  folder_.Write("c.json", "{");
  folder_.Write("d.json", Tiny("capped", R"( "cap": "1MiB",)"));
  folder_.Write("e.json", Tiny("meta-only", R"( "backends": ["meta"],)"));
  RunOptions options;
  options.context = "100MiB";
  const std::vector<PlannedScenario> plan = Plan(options);
  EXPECT_EQ(Summary(plan),
            (std::vector<std::string>{
                "alpha runs", "alpha UNRESOLVED ", "c UNRESOLVED ",
                "capped UNRESOLVED --context only applies with --card (a --cap is already what tensors may use)",
                "meta-only UNSUPPORTED runs on meta, not cpu (run it with --backend meta)"}));
  EXPECT_EQ(plan[1].result.error, dir_ + "/b.json: scenario name 'alpha' is already used by " + dir_ + "/a.json");
  EXPECT_EQ(plan[2].result.error.rfind(dir_ + "/c.json:1:", 0), 0u) << plan[2].result.error;
}

TEST_F(PlanTest, ABackendThatIsNotAvailableIsUnsupportedWithItsReason) {
  folder_.Write("a.json", Tiny("alpha"));
  const BackendCheck nowhere = [](const std::string& backend, std::string* why) {
    *why = backend + ": no device here";
    return false;
  };
  EXPECT_EQ(Summary(Plan(RunOptions{}, nowhere)), std::vector<std::string>{"alpha UNSUPPORTED cpu: no device here"});
}

// Note [Ranks need a GPU each] (run/rank_children.h): on cuda, a world above the machine's GPUs.
TEST_F(PlanTest, RanksThisMachineCannotRunAreUnsupportedWithTheReasonForTheLargestWorld) {
  const std::string everywhere = R"( "backends": ["cpu", "meta", "cuda"],)";
  folder_.Write("a.json", R"({"name": "ranks", "summary": "tiny",)" + everywhere + R"(
  "model": {"layers": [{"kind": "linear", "in": 4, "out": 2}]},
  "data": {"batch": 3, "shape": [4]},
  "loop": {"iterations": 2, "loss": "mean", "optimizer": {"kind": "sgd"}},
  "parallel": {"world": 2, "strategy": "ddp"},
  "variants": {"two": {}, "four": {"parallel": {"world": 4}}}})");
  folder_.Write("b.json", Tiny("one", everywhere));
  const RanksCheck no_gpu = [](const std::string& backend, int64_t world, std::string* why) {
    *why = RanksUnsupported(TraitsOf(BackendNamed(backend)), world, 0);
    return why->empty();
  };
  const BackendCheck no_gpu_at_all = [](const std::string&, std::string* why) {
    *why = "no GPU visible";
    return false;
  };
  RunOptions options;
  options.paths = {folder_.path()};
  RunPlan plan;
  std::string error;
  ASSERT_TRUE(PlanRun(options, "cuda", no_gpu_at_all, &plan, &error, no_gpu)) << error;
  // Before the backend's own reason: it says what the ranks need, and what runs them instead.
  EXPECT_EQ(Summary(plan.scenarios),
            (std::vector<std::string>{"ranks UNSUPPORTED needs 4 GPUs for NCCL ranks, this machine has 0 (--backend "
                                      "meta simulates one rank at any world; --backend cpu runs 4 real ranks on Gloo)",
                                      "one UNSUPPORTED no GPU visible"}));
  // cpu runs real ranks on the host: no device each.
  ASSERT_TRUE(PlanRun(options, "cpu", Everywhere, &plan, &error, no_gpu)) << error;
  EXPECT_EQ(Summary(plan.scenarios), (std::vector<std::string>{"ranks runs", "one runs"}));
}

TEST_F(PlanTest, ResultsFilesInAScannedFolderAreNotScenarios) {
  folder_.Write("a.json", Tiny("alpha"));
  const std::string results = folder_.Write("results.json", R"({"schema_version": 1, "scenarios": []})");
  EXPECT_EQ(Summary(Plan(RunOptions{})), std::vector<std::string>{"alpha runs"});
  RunOptions named;  // named on the command line, it is loaded (and does not load)
  named.paths = {results};
  RunPlan plan;
  std::string error;
  ASSERT_TRUE(PlanRun(named, "cpu", Everywhere, &plan, &error)) << error;
  ASSERT_EQ(plan.scenarios.size(), 1u);
  EXPECT_EQ(plan.scenarios[0].result.code, ResultCode::kUnresolved);
}

TEST_F(PlanTest, UsageErrorsFailThePlan) {
  RunPlan plan;
  std::string error;
  RunOptions options;
  options.paths = {dir_ + "/missing"};
  EXPECT_FALSE(PlanRun(options, "cpu", Everywhere, &plan, &error));
  EXPECT_NE(error.find(dir_ + "/missing"), std::string::npos) << error;
  options.paths = {dir_};
  options.card = "no-such-card";
  EXPECT_FALSE(PlanRun(options, "cpu", Everywhere, &plan, &error));
  EXPECT_EQ(error.rfind("--card: ", 0), 0u) << error;
  EXPECT_TRUE(plan.scenarios.empty());
  options.card = "";
  options.shard = "0/3";
  EXPECT_FALSE(PlanRun(options, "cpu", Everywhere, &plan, &error));
  EXPECT_EQ(error, "--shard: expected INDEX/COUNT with 1 <= INDEX <= COUNT, such as 2/3; got '0/3'");
  EXPECT_TRUE(plan.scenarios.empty());
}

// The real catalog in three shards: file k (0-based, in the sorted plan order) is shard (k mod 3) + 1's.
TEST(PlanShards, TheCatalogsThreeShardsAreDisjointAndCoverEveryFileOnce) {
  RunPlan whole;
  std::string error;
  ASSERT_TRUE(PlanRun(RunOptions{}, "cpu", Everywhere, &whole, &error)) << error;
  const std::vector<std::string> all = Files(whole);
  ASSERT_EQ(all.size(), 20u);
  EXPECT_EQ(Tally(whole.shard), "shard : 20 of 20, 20 selected");
  std::map<std::string, int> times_planned;
  const std::vector<std::string> tallies = {"shard 1/3: 7 of 20, 20 selected", "shard 2/3: 7 of 20, 20 selected",
                                            "shard 3/3: 6 of 20, 20 selected"};
  for (int index = 1; index <= 3; ++index) {
    RunOptions options;
    options.shard = std::to_string(index) + "/3";
    RunPlan plan;
    ASSERT_TRUE(PlanRun(options, "cpu", Everywhere, &plan, &error)) << error;
    std::vector<std::string> expected;
    for (size_t k = index - 1; k < all.size(); k += 3) expected.push_back(all[k]);
    EXPECT_EQ(Files(plan), expected) << options.shard.value();
    EXPECT_EQ(Tally(plan.shard), tallies[index - 1]);
    for (const std::string& file : Files(plan)) ++times_planned[file];
    RunPlan again;  // the same call, the same split
    ASSERT_TRUE(PlanRun(options, "cpu", Everywhere, &again, &error)) << error;
    EXPECT_EQ(Files(again), Files(plan));
  }
  ASSERT_EQ(times_planned.size(), all.size());
  for (const std::string& file : all) EXPECT_EQ(times_planned[file], 1) << file;
}

TEST_F(PlanTest, AFileThatDoesNotLoadIsInTheShardOfItsPosition) {
  folder_.Write("a.json", Tiny("alpha"));
  folder_.Write("b.json", Tiny("beta"));
  folder_.Write("c_broken.json", "{");
  folder_.Write("d.json", Tiny("delta"));
  EXPECT_EQ(Summary(Plan(Sharded("1/2"))), (std::vector<std::string>{"alpha runs", "c_broken UNRESOLVED "}));
  EXPECT_EQ(Summary(Plan(Sharded("2/2"))), (std::vector<std::string>{"beta runs", "delta runs"}));
}

// Each shard judges a name used twice as the whole run does, though the first user is in another shard.
TEST_F(PlanTest, ADuplicateNameIsADuplicateAcrossShards) {
  folder_.Write("a.json", Tiny("alpha"));
  folder_.Write("b.json", Tiny("alpha"));
  EXPECT_EQ(Summary(Plan(Sharded("1/2"))), std::vector<std::string>{"alpha runs"});
  const std::vector<PlannedScenario> second = Plan(Sharded("2/2"));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].result.code, ResultCode::kUnresolved);
  EXPECT_EQ(second[0].result.error, dir_ + "/b.json: scenario name 'alpha' is already used by " + dir_ + "/a.json");
}

// The deal does not depend on --filter: what it does not select is SKIPPED in the shard of its position.
TEST_F(PlanTest, TheFilterSkipsWithinAShardAndIsCountedAcrossShards) {
  folder_.Write("a.json", Tiny("alpha"));
  folder_.Write("b.json", Tiny("beta"));
  folder_.Write("c.json", Tiny("gamma"));
  const RunPlan first = FullPlan(Sharded("1/2", "b*"));
  EXPECT_EQ(Summary(first.scenarios), (std::vector<std::string>{"alpha SKIPPED not selected by --filter 'b*'",
                                                                "gamma SKIPPED not selected by --filter 'b*'"}));
  EXPECT_EQ(Tally(first.shard), "shard 1/2: 2 of 3, 1 selected");
  const RunPlan second = FullPlan(Sharded("2/2", "b*"));
  EXPECT_EQ(Summary(second.scenarios), std::vector<std::string>{"beta runs"});
  EXPECT_EQ(Tally(second.shard), "shard 2/2: 1 of 3, 1 selected");
  EXPECT_EQ(Tally(FullPlan(Sharded("2/2", "nothing*")).shard), "shard 2/2: 1 of 3, 0 selected");
}

TEST_F(PlanTest, AResultsFileTakesNoPosition) {
  folder_.Write("a.json", Tiny("alpha"));
  folder_.Write("b.json", R"({"schema_version": 1, "scenarios": []})");
  folder_.Write("c.json", Tiny("gamma"));
  EXPECT_EQ(Summary(Plan(Sharded("2/2"))), std::vector<std::string>{"gamma runs"});
}

TEST_F(PlanTest, MoreShardsThanFilesLeaveEmptyShards) {
  folder_.Write("a.json", Tiny("alpha"));
  const RunPlan plan = FullPlan(Sharded("3/5"));
  EXPECT_TRUE(plan.scenarios.empty());
  EXPECT_EQ(Tally(plan.shard), "shard 3/5: 0 of 1, 1 selected");
}

// GoogleTest's variables shard the plan only where options.gtest_sharding asks (`oomguard run`), and
// --shard wins over them.
TEST_F(PlanTest, GTestVariablesShardOnlyWhenAsked) {
  testing::ScopedEnvironment env({"GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX", "GTEST_SHARD_STATUS_FILE"});
  folder_.Write("a.json", Tiny("alpha"));
  folder_.Write("b.json", Tiny("beta"));
  const std::string status = dir_ + "/status";
  env.Set("GTEST_TOTAL_SHARDS", "2");
  env.Set("GTEST_SHARD_INDEX", "1");
  env.Set("GTEST_SHARD_STATUS_FILE", status);
  RunOptions options;
  EXPECT_EQ(Summary(Plan(options)), (std::vector<std::string>{"alpha runs", "beta runs"}));  // explain's, fit's
  struct stat st {};
  EXPECT_NE(stat(status.c_str(), &st), 0) << "not asked, so not honoured";
  options.gtest_sharding = true;
  EXPECT_EQ(Summary(Plan(options)), std::vector<std::string>{"beta runs"});
  EXPECT_EQ(stat(status.c_str(), &st), 0) << status;
  options.shard = "1/2";
  EXPECT_EQ(Summary(Plan(options)), std::vector<std::string>{"alpha runs"});

  env.Set("GTEST_SHARD_INDEX", "x");
  options.shard.reset();
  options.paths = {dir_};
  RunPlan plan;
  std::string error;
  EXPECT_FALSE(PlanRun(options, "cpu", Everywhere, &plan, &error));
  EXPECT_EQ(error, "GTEST_SHARD_INDEX: expected a whole number from 0 to 1 (GTEST_TOTAL_SHARDS is 2), got 'x'");
}

}  // namespace
}  // namespace oomguard
