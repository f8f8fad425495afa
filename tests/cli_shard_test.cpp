// `oomguard run --shard INDEX/COUNT` through the real CLI: malformed shards, the commands that take
// none, and a folder's scenarios split across shards (each with its own reports; GoogleTest's sharding
// variables; a run without shards).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "tests/cli_result.h"
#include "tests/scoped_environment.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

using testing::Cli;
using testing::CliResult;
using testing::Contents;
using testing::Exists;

TEST(Cli, EveryMalformedShardIsAUsageErrorThatSaysWhatIsExpected) {
  for (const std::string bad : {"0/3", "4/3", "1/0", "x", "1/", "-1/3"}) {
    CliResult r = Cli({"run", "--shard", bad});
    EXPECT_EQ(r.code, kExitUsage) << bad;
    EXPECT_EQ(r.err,
              "oomguard run: --shard: expected INDEX/COUNT with 1 <= INDEX <= COUNT, such as 2/3; got '" + bad + "'\n");
    EXPECT_EQ(r.out, "") << bad;
  }
}

TEST(Cli, ExplainAndFitTakeNoShard) {
  for (const char* command : {"explain", "fit"}) {
    CliResult r = Cli({command, "forgotten-no-grad", "--shard", "1/2"});
    EXPECT_EQ(r.code, kExitUsage) << command;
    EXPECT_EQ(r.err.rfind("The following arguments were not expected: 1/2 --shard\n", 0), 0u) << r.err;
  }
}

// The <testsuite> names of a JUnit file, in order.
std::vector<std::string> Suites(const std::string& xml) {
  std::vector<std::string> names;
  const std::regex suite("<testsuite name=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(xml.begin(), xml.end(), suite); it != std::sregex_iterator(); ++it) {
    names.push_back((*it)[1]);
  }
  return names;
}

// A folder of six files, one of which does not load, run through the CLI on meta in child processes of
// the real oomguard. Sorted: alpha, beta, gamma, delta, e_broken, zeta; in three shards 1/3 takes
// positions 0 and 3, 2/3 takes 1 and 4, 3/3 takes 2 and 5.
class ShardRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("OOMGUARD_SELF", OOMGUARD_EXE, 1);
    const char* names[] = {"alpha", "beta", "gamma", "delta", "", "zeta"};
    for (int i = 0; i < 6; ++i) {
      const std::string file = std::string(1, static_cast<char>('a' + i)) + (i == 4 ? "_broken" : "") + ".json";
      folder_.Write(file, i == 4 ? "{" : R"({"name": ")" + std::string(names[i]) + R"(", "summary": "tiny",
        "backends": ["meta"], "model": {"layers": [{"kind": "linear", "in": 8, "out": 4}]}, "data": {"shape": [8]},
        "variants": {"only": {}}})");
    }
  }
  void TearDown() override { unsetenv("OOMGUARD_SELF"); }
  CliResult Run(std::vector<std::string> extra) {
    std::vector<std::string> args = {"run", dir_, "--backend", "meta"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Cli(args);
  }
  testing::ScopedEnvironment env_{{"GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX", "GTEST_SHARD_STATUS_FILE"}};
  testing::ScratchFolder folder_{"cli-shard"};
  const std::string dir_ = folder_.path();
};

TEST_F(ShardRunTest, EachShardWritesItsOwnReportsWithOnlyItsScenarios) {
  const std::vector<std::vector<std::string>> expected = {{"alpha", "delta"}, {"beta", "e_broken"}, {"gamma", "zeta"}};
  const int codes[] = {kExitOk, kExitUsage, kExitOk};  // e_broken does not load (an input error) in shard 2 alone
  const std::string totals[] = {"2 PASS", "1 PASS 1 UNRESOLVED  (1 failing)", "2 PASS"};
  std::map<std::string, int> times_reported;
  for (int index = 1; index <= 3; ++index) {
    const std::string shard = std::to_string(index) + "/3", label = std::to_string(index) + "-of-3";
    CliResult r =
        Run({"--shard", shard, "--report", "junit=" + dir_ + "/j-{shard}.xml", "--json", dir_ + "/r-{shard}.json"});
    EXPECT_EQ(r.code, codes[index - 1]) << r.out << r.err;
    // The earlier shards' results files in the folder are left out, each with a note (issue 35, D26).
    std::string notes;
    for (int earlier = 1; earlier < index; ++earlier) {
      notes += "note: " + dir_ + "/r-" + std::to_string(earlier) +
               "-of-3.json: a results file of `oomguard run --json`, not a scenario: left out\n";
    }
    EXPECT_NE(r.out.find(totals[index - 1] + "\n" + notes + "shard " + shard + ": 2 of 6 scenario files\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("\nresults: " + dir_ + "/r-" + label + ".json\nreport: " + dir_ + "/j-" + label + ".xml\n"),
              std::string::npos)
        << r.out;
    const std::string xml = Contents(dir_ + "/j-" + label + ".xml");
    EXPECT_EQ(Suites(xml), expected[index - 1]) << xml;
    EXPECT_NE(xml.find("<testsuites name=\"oomguard shard " + shard + "\" tests=\"2\" "), std::string::npos) << xml;
    for (const std::string& name : Suites(xml)) ++times_reported[name];
    const nlohmann::json results = nlohmann::json::parse(Contents(dir_ + "/r-" + label + ".json"));
    std::vector<std::string> names;
    for (const nlohmann::json& s : results.at("scenarios")) names.push_back(s.at("name"));
    EXPECT_EQ(names, expected[index - 1]);
  }
  EXPECT_EQ(times_reported, (std::map<std::string, int>{
                                {"alpha", 1}, {"beta", 1}, {"delta", 1}, {"e_broken", 1}, {"gamma", 1}, {"zeta", 1}}));
  EXPECT_FALSE(Exists(dir_ + "/j-{shard}.xml"));
  EXPECT_FALSE(Exists(dir_ + "/j-all.xml"));
}

// The variables decide only without --shard; the status file tells the runner they were honoured. The
// filter keeps the children out: what it does not select is SKIPPED and reported by its own shard.
TEST_F(ShardRunTest, GoogleTestsVariablesShardTheRunUnlessShardIsGiven) {
  const std::string status = dir_ + "/status";
  env_.Set("GTEST_TOTAL_SHARDS", "3");
  env_.Set("GTEST_SHARD_INDEX", "1");
  env_.Set("GTEST_SHARD_STATUS_FILE", status);
  CliResult r = Run({"--filter", "e_*", "--report", "junit=" + dir_ + "/g-{shard}.xml"});
  EXPECT_EQ(r.code, kExitUsage) << r.err;  // e_broken does not load
  EXPECT_NE(r.out.find("\nshard 2/3: 2 of 6 scenario files\n"), std::string::npos) << r.out;
  EXPECT_EQ(Suites(Contents(dir_ + "/g-2-of-3.xml")), (std::vector<std::string>{"e_broken", "beta"}));
  EXPECT_TRUE(Exists(status));

  // --shard wins; a shard whose part the filter leaves empty passes, since the filter selects elsewhere.
  r = Run({"--shard", "3/3", "--filter", "e_*", "--report", "junit=" + dir_ + "/g-{shard}.xml"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(Suites(Contents(dir_ + "/g-3-of-3.xml")), (std::vector<std::string>{"gamma", "zeta"}));

  env_.Set("GTEST_TOTAL_SHARDS", "0");
  r = Run({"--filter", "e_*"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: GTEST_TOTAL_SHARDS: expected a whole number >= 1, got '0'\n");
}

TEST_F(ShardRunTest, WithoutShardsTheReportIsAllAndAFilterMatchingNothingAnywhereIsAUsageError) {
  CliResult r = Run({"--filter", "e_*", "--report", "junit=" + dir_ + "/u-{shard}.xml"});
  EXPECT_EQ(r.code, kExitUsage) << r.err;  // e_broken does not load
  EXPECT_EQ(r.out.find("\nshard "), std::string::npos) << r.out;
  const std::string xml = Contents(dir_ + "/u-all.xml");
  EXPECT_EQ(Suites(xml), (std::vector<std::string>{"e_broken", "alpha", "beta", "gamma", "delta", "zeta"}));
  EXPECT_NE(xml.find("<testsuites name=\"oomguard\" tests=\"6\" "), std::string::npos) << xml;
  EXPECT_EQ(xml.find("<properties>"), std::string::npos);

  r = Run({"--shard", "2/3", "--filter", "nothing-anywhere"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: no scenario matches --filter 'nothing-anywhere'\n");

  // A variant glob that matches nothing: the scenarios whose names matched say which variants they have.
  r = Run({"--filter", "alpha/fixed"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err,
            "oomguard run: no scenario with a variant that matches --filter 'alpha/fixed'\n"
            "  alpha: not selected by --filter 'alpha/fixed' (no variant matches 'fixed'; its variants: only)\n");
  r = Run({"--filter", "alpha/on*"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
}

}  // namespace
}  // namespace oomguard
