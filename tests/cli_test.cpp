#include "cli/cli.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
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

// Note [Whose kernels a check is for] (model/scenario.h), end to end: the dropout layer's forward keeps
// its [32, 64] float output, the 4-byte mean loss and its mask: cpu's noise in float (4 bytes an
// element), a card's bool mask (1 byte). Each check is judged with its kernels and skipped with the
// others; a kernels value that is neither is an input error at its path, exit 2.
TEST_F(CliKernelsTest, AChecksKernelsDecideWhereItIsJudged) {
  folder_.Write("drop.json", R"({"name": "drop", "summary": "dropout", "backends": ["cpu", "meta"],
    "model": {"layers": [{"kind": "linear", "in": 64, "out": 64}, {"kind": "dropout", "p": 0.1}]},
    "data": {"batch": 32, "shape": [64]}, "variants": {"only": {}},
    "expect": {"only": {"checks": [{"kernels": "cpu", "check": "forward_saved_bytes == 32 * 64 * (4 + 4) + 4"},
                                   {"kernels": "cuda", "check": "forward_saved_bytes == 32 * 64 * (1 + 4) + 4"}]}}})");
  const std::string json = folder_.path() + "/r.json";
  for (const std::string kernels : {"cpu", "cuda"}) {
    SCOPED_TRACE(kernels);
    const testing::CliResult r =
        testing::Cli({"run", folder_.path() + "/drop.json", "--json", json, "--backend", "meta", "--kernels", kernels});
    EXPECT_EQ(r.code, kExitOk) << r.out << r.err;
    const nlohmann::json checks =
        nlohmann::json::parse(testing::Contents(json))["scenarios"][0]["variants"][0]["checks"];
    ASSERT_EQ(checks.size(), 2u);
    const nlohmann::json& judged = checks[kernels == "cpu" ? 0 : 1];
    const nlohmann::json& skipped = checks[kernels == "cpu" ? 1 : 0];
    EXPECT_EQ(judged["holds"], true) << judged;
    EXPECT_EQ(skipped["skipped"], true) << skipped;
    EXPECT_EQ(skipped["explanation"],
              std::string(skipped["expression"]) + ": skipped (for " +
                  (kernels == "cpu" ? "cuda kernels; measured with cpu" : "cpu kernels; measured with cuda sm_75") +
                  " kernels)");
  }
  folder_.Write("bad.json", R"({"name": "bad", "summary": "s", "data": {"shape": [4]},
    "model": {"layers": [{"kind": "linear", "in": 4, "out": 4}]}, "variants": {"a": {}},
    "checks": [{"kernels": "sm_75", "check": "a.peak > 0"}]})");
  const testing::CliResult bad = testing::Cli({"run", folder_.path() + "/bad.json"});
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_NE(bad.out.find("bad.json: at checks[0].kernels: unknown kernels \"sm_75\" (valid values: cpu, cuda)"),
            std::string::npos)
      << bad.out;
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
