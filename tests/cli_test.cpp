#include "cli/cli.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "backends/meta/cublas_workspace.h"
#include "run/run_options.h"
#include "tests/cli_result.h"
#include "tests/scoped_environment.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

using testing::Cli;
using testing::CliResult;
using testing::Contents;
using testing::Exists;

TEST(Cli, VersionNamesToolLibTorchCudaAndBackends) {
  CliResult r = Cli({"--version"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.out.rfind("oomguard 0.1.0\nLibTorch 2.11.0 (torch 2.11.0", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("  cpu: ready\n  meta: ready\n  cuda: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\noneDNN ISA capped at AVX2: cpu's bytes are the same on every x86-64 machine\nbackends:\n"),
            std::string::npos)
      << r.out;
}

TEST(Cli, CardsPrintsEveryPresetWithItsCap) {
  CliResult r = Cli({"cards"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_NE(r.out.find("t4          NVIDIA T4 16GB                  14.74 GiB   426.00 MiB   14.33 GiB\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("h200        NVIDIA H200 141GB               139.80 GiB  426.00 MiB   139.38 GiB\n"),
            std::string::npos)
      << r.out;
  CliResult with_sources = Cli({"cards", "--sources"});
  EXPECT_NE(with_sources.out.find("14.33 GiB\n    source: 15095 MiB = 14.74 GiB, the total in PyTorch OOM messages"),
            std::string::npos)
      << with_sources.out;
}

TEST(Cli, CardsJsonGivesEveryPresetInBytes) {
  CliResult r = Cli({"cards", "--json"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.out.rfind("[\n  {\n    \"key\": \"t4\",\n    \"name\": \"NVIDIA T4 16GB\",\n"
                        "    \"total_bytes\": 15828254720,\n    \"context_bytes\": 446693376,\n"
                        "    \"cap_bytes\": 15381561344\n  },\n",
                        0),
            0u)
      << r.out;
  EXPECT_EQ(Cli({"cards", "--json", "--sources"}).code, kExitUsage);
}

TEST(Cli, MalformedCapIsAUsageErrorThatSaysWhatIsAccepted) {
  CliResult r = Cli({"run", "--cap", "12XB"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err,
            "oomguard run: --cap: invalid size '12XB': unknown unit 'XB'; expected a size such as 16GiB, 15.5GB, "
            "512MiB, 4096 or 1e9 (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)\n");
  EXPECT_EQ(Cli({"run", "--cap", "0"}).err, "oomguard run: --cap: the cap must be larger than 0 bytes\n");
}

TEST(Cli, UnknownCardIsAUsageErrorListingTheCards) {
  CliResult r = Cli({"run", "--card", "x100"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err.rfind("oomguard run: --card: unknown card 'x100'; known cards: t4, l4, ", 0), 0u) << r.err;
}

TEST(Cli, BadFaultSpecIsAUsageError) {
  CliResult r = Cli({"run", "--inject", "nth=0"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: --inject: invalid fault spec 'nth=0': nth must be a whole number >= 1, got '0'\n");
}

TEST(Cli, FaultInjectionOnCudaIsAccepted) {
  testing::ScratchFolder folder("cli-inject");
  folder.Write("tiny.json", R"({"name": "tiny", "summary": "one layer", "backends": ["cuda"],
    "model": {"layers": [{"kind": "linear", "in": 8, "out": 4}]}, "data": {"shape": [8]}, "variants": {"only": {}}})");
  setenv("OOMGUARD_SELF", OOMGUARD_EXE, 1);  // with a GPU the variant runs, in a child of the real CLI
  CliResult r = Cli({"run", folder.path(), "--backend", "cuda", "--inject", "nth=3"});
  unsetenv("OOMGUARD_SELF");
  EXPECT_NE(r.code, kExitUsage) << r.err;
  EXPECT_EQ(r.err.find("--inject"), std::string::npos) << r.err;
  // Measured with a GPU (the injected OOM fails the variant), UNSUPPORTED without one; never refused.
  EXPECT_TRUE(r.out.find("FAIL") != std::string::npos || r.out.find("UNSUPPORTED tiny") != std::string::npos) << r.out;
}

TEST(Cli, FlagMisuseIsAUsageError) {
  EXPECT_EQ(Cli({"run", "--card", "t4", "--cap", "1GiB"}).code, kExitUsage);
  EXPECT_EQ(Cli({"run", "--backend", "gpu"}).code, kExitUsage);
  EXPECT_EQ(Cli({"run", "--jobs", "0"}).code, kExitUsage);
  EXPECT_EQ(Cli({"--no-such-flag"}).code, kExitUsage);
  EXPECT_EQ(Cli({"frobnicate"}).code, kExitUsage);
  EXPECT_EQ(Cli({"run", "--context", "1GiB", "--cap", "4GiB"}).err,
            "oomguard run: --context only applies with --card (a --cap is already what tensors may use)\n");
}

// A mistyped flag or command gets what scenario names and knobs get: the near spelling.
TEST(Cli, AMistypedFlagOrCommandGetsADidYouMean) {
  CliResult r = Cli({"run", "--bakend", "meta"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err,
            "The following argument was not expected: --bakend (--bakend: did you mean --backend?)\n"
            "Run with --help for more information.\n");
  const std::string fit = Cli({"fit", "x.json", "--knbo=batch"}).err;
  EXPECT_NE(fit.find("not expected: --knbo=batch (--knbo=batch: did you mean --knob?)"), std::string::npos) << fit;
  EXPECT_EQ(Cli({"rnu"}).err,
            "The following argument was not expected: rnu (rnu: did you mean run?)\n"
            "Run with --help for more information.\n");
  // Nothing near: CLI11's message as it was.
  EXPECT_EQ(Cli({"run", "--frobnicate"}).err,
            "The following argument was not expected: --frobnicate\nRun with --help for more information.\n");
}

TEST(Cli, HelpIsNotAnError) {
  CliResult r = Cli({"--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_NE(r.out.find("cards"), std::string::npos);
  EXPECT_NE(r.out.find("run"), std::string::npos);
}

}  // namespace
}  // namespace oomguard

namespace oomguard {
namespace {

// explain runs the scenario in child processes of the real CLI, as `oomguard explain` does.
class ExplainTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("OOMGUARD_SELF", OOMGUARD_EXE, 1); }
  void TearDown() override { unsetenv("OOMGUARD_SELF"); }
  testing::ScratchFolder folder_{"explain"};
};

TEST_F(ExplainTest, TeachesThenMeasuresWhereTheScenarioRuns) {
  folder_.Write("shapes.json", R"({"name": "shapes-only", "summary": "a meta-only scenario", "teach": "Why: shapes.",
    "backends": ["meta"], "model": {"layers": [{"kind": "linear", "in": 8, "out": 4}]}, "data": {"shape": [8]},
    "variants": {"only": {}}})");
  CliResult r = Cli({"explain", "shapes-only", "--paths", folder_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out.rfind("shapes-only: a meta-only scenario\n\nWhy: shapes.\n\nMeasured now (", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("PASS        shapes-only  [meta, cpu kernels, NVIDIA T4 16GB"), std::string::npos) << r.out;
  // explain shows the caching allocator's model, whose verdict it is. At the 360-byte peak in backward,
  // 9 tensors are live (weight, bias, input, output, loss and a gradient of each), all under 512
  // bytes: 9 blocks of 512 B in one 2 MiB small-pool segment.
  EXPECT_NE(r.out.find("\n              cuda model: allocated 4.50 KiB, reserved 2.00 MiB (fragmentation 2.00 MiB), "
                       "0 retries, 0 OOMs; the verdict is on reserved bytes\n"),
            std::string::npos)
      << r.out;

  r = Cli({"explain", "shapes-only", "--paths", folder_.path(), "--backend", "cpu"});  // asked for: kept
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("runs on meta, not cpu (run it with --backend meta)"), std::string::npos) << r.out;

  folder_.Write("untaught.json", R"({"name": "untaught", "summary": "no teach text", "backends": ["meta"],
    "model": {"layers": [{"kind": "linear", "in": 8, "out": 4}]}, "data": {"shape": [8]}, "variants": {"only": {}}})");
  r = Cli({"explain", "untaught", "--paths", folder_.path()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out.rfind("untaught: no teach text\n\nMeasured now (", 0), 0u) << r.out;

  r = Cli({"explain", "shapes-onyl", "--paths", folder_.path()});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("did you mean 'shapes-only'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace oomguard

namespace oomguard {
namespace {

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

namespace oomguard {
namespace {

// `--kernels cuda` (Note [Kernels of a meta run], run/run_options.h): the children mirror a card's CUDA
// kernels, and every measurement says whose.
class CliKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("OOMGUARD_SELF", OOMGUARD_EXE, 1);
    folder_.Write("drop.json", R"({"name": "drop", "summary": "dropout", "backends": ["cpu", "meta"],
      "model": {"layers": [{"kind": "linear", "in": 64, "out": 64}, {"kind": "dropout", "p": 0.1}]},
      "data": {"batch": 32, "shape": [64]}, "variants": {"only": {}}})");
  }
  void TearDown() override { unsetenv("OOMGUARD_SELF"); }
  nlohmann::json Measurement(const std::vector<std::string>& flags) {
    const std::string json = folder_.path() + "/r.json";
    std::vector<std::string> args = {"run", folder_.path() + "/drop.json", "--json", json};
    args.insert(args.end(), flags.begin(), flags.end());
    const testing::CliResult r = testing::Cli(args);
    EXPECT_EQ(r.code, kExitOk) << r.err << r.out;
    last_out_ = r.out;
    return nlohmann::json::parse(testing::Contents(json))["scenarios"][0]["variants"][0]["measurement"];
  }
  testing::ScratchFolder folder_{"kernels"};
  std::string last_out_;
};

TEST_F(CliKernelsTest, ARunsJsonSaysWhoseKernelsItMirrored) {
  const nlohmann::json cpu = Measurement({"--backend", "meta"});
  EXPECT_EQ(cpu["kernels"], "cpu");
  const nlohmann::json t4 = Measurement({"--backend", "meta", "--kernels", "cuda"});
  EXPECT_EQ(t4["kernels"], "cuda sm_75");
  EXPECT_NE(last_out_.find("[meta, cuda sm_75 kernels, NVIDIA T4"), std::string::npos) << last_out_;
  // What the forward keeps: the float32 dropout's mask is 1 byte an element on the card, cpu's noise 4.
  // The card's process holds cuBLAS's and cuBLASLt's workspaces from the start, outside the ledger (Note
  // [cuBLAS workspaces held from the start]): reported as the model's, not in forward_saved_bytes.
  EXPECT_EQ(t4["forward_saved_bytes"].get<int64_t>(), cpu["forward_saved_bytes"].get<int64_t>() - 32 * 64 * (4 - 1));
  EXPECT_EQ(t4["cuda_model"]["allocated_at_start_bytes"].get<int64_t>(),
            CublasWorkspaceBytes(75) + CublasLtWorkspaceBytes(75));
  EXPECT_EQ(t4["cuda_model"]["reserved_at_start_bytes"].get<int64_t>(), (20 + 2) << 20);
  EXPECT_FALSE(cpu.contains("cuda_model") && cpu.at("cuda_model").contains("allocated_at_start_bytes"));
  EXPECT_NE(last_out_.find("held from the start (cuBLAS workspaces"), std::string::npos) << last_out_;
  EXPECT_EQ(Measurement({"--backend", "meta", "--kernels", "cuda", "--card", "h100"})["kernels"], "cuda sm_90");
  const nlohmann::json capped = Measurement({"--backend", "meta", "--kernels", "cuda", "--cap", "1GiB"});
  EXPECT_EQ(capped["kernels"], "cuda sm_80");
  EXPECT_NE(capped["warnings"].dump().find("sm_80"), std::string::npos) << capped.dump();
  EXPECT_EQ(Measurement({"--backend", "cpu"})["kernels"], "cpu");
}

// Note [A card's SM count in card mode]: the run's card brings its SM count (an RTX 3090's 82, sm_86);
// a cap alone takes sm_80 and an A100's 108 SMs, and the warning says so.
TEST(ScenarioKernelTargetTest, TheCardBringsItsSmCount) {
  RunOptions options;
  options.kernels = kKernelsCuda;
  options.card = "rtx3090";
  KernelTarget target;
  std::string warning, error;
  ASSERT_TRUE(ScenarioKernelTarget(options, Scenario{}, &target, &warning, &error)) << error;
  EXPECT_EQ(target.compute_capability, 86);
  EXPECT_EQ(target.device.sm_count, 82);
  options.card.clear();
  options.cap = "1GiB";
  ASSERT_TRUE(ScenarioKernelTarget(options, Scenario{}, &target, &warning, &error)) << error;
  EXPECT_EQ(target.device.sm_count, 108);
  EXPECT_NE(warning.find("108 SMs"), std::string::npos) << warning;
}

TEST_F(CliKernelsTest, KernelsWithAnotherBackendIsAUsageError) {
  const std::string file = folder_.path() + "/drop.json";
  testing::CliResult r = testing::Cli({"run", file, "--backend", "cpu", "--kernels", "cuda"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--kernels cuda: only the meta backend mirrors other kernels (--backend cpu runs its own); "
                       "use --backend meta"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(testing::Cli({"run", file, "--backend", "meta", "--kernels", "gpu"}).code, kExitUsage);
  EXPECT_EQ(testing::Cli({"explain", file, "--backend", "cpu", "--kernels", "cpu"}).code, kExitUsage);
  EXPECT_EQ(testing::Cli({"fit", file, "--backend", "cpu", "--kernels", "cuda", "--cap", "1GiB"}).code, kExitUsage);
}

}  // namespace
}  // namespace oomguard
