#include "cli/cli.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

CliResult Cli(std::vector<std::string> args) {
  args.insert(args.begin(), "oomguard");
  std::ostringstream out, err;
  const int code = RunCli(args, out, err);
  return {code, out.str(), err.str()};
}

TEST(Cli, VersionNamesToolLibTorchCudaAndBackends) {
  CliResult r = Cli({"--version"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.out.rfind("oomguard 0.1.0\nLibTorch 2.11.0 (torch 2.11.0", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("  cpu: ready\n  meta: ready\n  cuda: "), std::string::npos) << r.out;
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
  EXPECT_NE(r.out.find("PASS        shapes-only  [meta, NVIDIA T4 16GB"), std::string::npos) << r.out;
  // explain adds the caching allocator's prediction. At the 360-byte peak in backward, 9 tensors are
  // live (weight, bias, input, output, loss and a gradient of each), all under 512 bytes: 9 blocks of
  // 512 B in one 2 MiB small-pool segment.
  EXPECT_NE(r.out.find("\n              cuda model: allocated 4.50 KiB, reserved 2.00 MiB (fragmentation 2.00 MiB), "
                       "0 retries, 0 OOMs predicted\n"),
            std::string::npos)
      << r.out;

  r = Cli({"explain", "shapes-only", "--paths", folder_.path(), "--backend", "cpu"});  // asked for: kept
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("runs on meta, not cpu (run it with --backend meta)"), std::string::npos) << r.out;

  r = Cli({"explain", "shapes-onyl", "--paths", folder_.path()});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("did you mean 'shapes-only'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace oomguard
