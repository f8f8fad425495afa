// The plan of a run: which files run, and for the others the code and reason they get, without a
// child process (run/plan.h).
#include "run/plan.h"

#include <gtest/gtest.h>

#include "scratch_folder.h"

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

class PlanTest : public ::testing::Test {
 protected:
  std::vector<PlannedScenario> Plan(RunOptions options, const BackendCheck& available = Everywhere) {
    options.paths = {folder_.path()};
    RunPlan plan;
    std::string error;
    EXPECT_TRUE(PlanRun(options, "cpu", available, &plan, &error)) << error;
    return plan.scenarios;
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
}

}  // namespace
}  // namespace oomguard
