// The runner-to-child protocol: a MeasureRequest written as a command line and read back whole, so
// a field the parent sets cannot be lost on the way (run/child_protocol.h, Note [One list of fields]).
#include "run/child_protocol.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "base/exit_codes.h"
#include "run/measure_child.h"
#include "scenario/scenario_loader.h"
#include "tests/cli_result.h"
#include "tests/scoped_environment.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

// Every field set to something other than its default.
MeasureRequest EveryFieldSet() {
  MeasureRequest r;
  r.scenario_file = "/s/tiny.json";
  r.variant = "bad&name<\"x\">";
  r.variant_file = "/tmp/scratch/0.variant.json";
  r.backend = "meta";
  r.card = "a100-80gb";
  r.cap = "12GiB";
  r.context = "500MiB";
  r.inject = {"nth=5", "p=0.01,seed=7"};
  r.iterations = 3;
  r.snapshot_dir = "/tmp/scratch";
  r.snapshot_all = true;
  r.model_cuda = true;
  r.verdict = "allocated";
  r.alloc_conf = "expandable_segments:True";
  r.out_path = "/tmp/scratch/0.json";
  r.parent_pid = getpid();  // what MeasureRequestFor sets: the runner
  r.ranks_store = "/tmp/scratch/0.store";  // one of a variant's real ranks (run/rank_children.h)
  r.rank = 3;
  r.ranks_timeout_ms = 30000;
  return r;
}

std::vector<std::string> ArgsAfterCommand(const std::vector<std::string>& argv) {
  return {argv.begin() + 2, argv.end()};
}

TEST(ChildProtocol, EveryFieldSurvivesTheRoundTrip) {
  const MeasureRequest sent = EveryFieldSet();
  const std::vector<std::string> argv = ChildArgv("/bin/oomguard", sent);
  EXPECT_EQ(argv, (std::vector<std::string>{"/bin/oomguard",  "__measure",
                                            "--scenario",     "/s/tiny.json",
                                            "--variant",      "bad&name<\"x\">",
                                            "--variant-file", "/tmp/scratch/0.variant.json",
                                            "--backend",      "meta",
                                            "--out",          "/tmp/scratch/0.json",
                                            "--card",         "a100-80gb",
                                            "--cap",          "12GiB",
                                            "--context",      "500MiB",
                                            "--inject",       "nth=5",
                                            "--inject",       "p=0.01,seed=7",
                                            "--iterations",   "3",
                                            "--snapshot-dir", "/tmp/scratch",
                                            "--snapshot-all", "--model-cuda",
                                            "--verdict",      "allocated",
                                            "--alloc-conf",   "expandable_segments:True",
                                            "--parent-pid",   std::to_string(getpid()),
                                            "--ranks-store",  "/tmp/scratch/0.store",
                                            "--rank",         "3",
                                            "--ranks-timeout-ms", "30000"}));
  MeasureRequest received;
  std::string error;
  ASSERT_TRUE(ParseMeasureRequest(ArgsAfterCommand(argv), &received, &error)) << error;
  EXPECT_EQ(received, sent);
  // Each field on its own, so that a field the comparison missed would still show here.
  EXPECT_EQ(received.inject, sent.inject);
  EXPECT_EQ(received.iterations, 3);
  EXPECT_TRUE(received.snapshot_all);
  EXPECT_TRUE(received.model_cuda);
  EXPECT_EQ(received.parent_pid, getpid());
  EXPECT_EQ(received.ranks_store, "/tmp/scratch/0.store");
  EXPECT_EQ(received.rank, 3);
  EXPECT_EQ(received.ranks_timeout_ms, 30000);
}

TEST(ChildProtocol, DefaultsAreLeftOffTheCommandLine) {
  MeasureRequest sent;
  sent.scenario_file = "a.json";
  sent.variant = "base";
  sent.backend = "cpu";
  sent.out_path = "o.json";
  const std::vector<std::string> argv = ChildArgv("self", sent);
  EXPECT_EQ(argv, (std::vector<std::string>{"self", "__measure", "--scenario", "a.json", "--variant", "base",
                                            "--backend", "cpu", "--out", "o.json"}));
  MeasureRequest received = EveryFieldSet();  // parsing starts from a fresh request
  std::string error;
  ASSERT_TRUE(ParseMeasureRequest(ArgsAfterCommand(argv), &received, &error)) << error;
  EXPECT_EQ(received, sent);
}

TEST(ChildProtocol, TheRunsFlagsBecomeTheRequest) {
  RunOptions options;
  options.card = "a100-80gb";
  options.cap = "12GiB";
  options.context = "500MiB";
  options.inject = {"nth=5", "p=0.01,seed=7"};
  options.iterations = 3;
  options.snapshot_dir = "/kept";  // the child records into the scratch folder instead
  options.model_cuda = true;
  options.verdict = "allocated";
  options.alloc_conf = "expandable_segments:True";
  options.filter = "t*";  // the parent's alone: filter, jobs, timeout, reports, baselines
  options.jobs = 4;
  MeasureRequest expected = EveryFieldSet();
  expected.variant_file.clear();  // the runner's to write, when it spawns the child
  expected.ranks_store.clear();   // the runner's too, per rank (run/rank_children.h)
  expected.rank = 0;
  expected.ranks_timeout_ms = 0;
  EXPECT_EQ(
      MeasureRequestFor(options, "/s/tiny.json", "bad&name<\"x\">", "meta", "/tmp/scratch", "/tmp/scratch/0.json"),
      expected);
  options.snapshot_dir.clear();
  const MeasureRequest plain = MeasureRequestFor(options, "f", "v", "cpu", "/tmp/scratch", "o");
  EXPECT_EQ(plain.snapshot_dir, "");
  EXPECT_FALSE(plain.snapshot_all);
}

TEST(ChildProtocol, TheDefaultVerdictAndTheEnvironmentsAllocatorConfig) {
  testing::ScopedEnvironment env({"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"});
  setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:64", 1);
  const MeasureRequest r = MeasureRequestFor(RunOptions{}, "f", "v", "cpu", "/tmp/scratch", "o");
  EXPECT_EQ(r.verdict, "");  // reserved, the default, is left off the child's command line
  EXPECT_EQ(r.alloc_conf, "max_split_size_mb:64");  // resolved here: the child reads no environment
}

TEST(ChildProtocol, ACommandLineItDoesNotUnderstandIsRefused) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--scenario", "a", "--variant", "v", "--backend", "cpu", "--out", "o", "--jobs", "2"},
       "unknown argument '--jobs'"},
      {{"--scenario", "a", "--variant", "v", "--backend", "cpu", "--out"}, "--out needs a value"},
      {{"--scenario", "a", "--iterations", "3x"}, "--iterations: '3x' is not a whole number"},
      {{"--variant", "v", "--backend", "cpu", "--out", "o"}, "missing --scenario"},
      {{"--scenario", "a", "--variant", "v", "--out", "o"}, "missing --backend"},
  };
  for (const auto& [args, message] : cases) {
    MeasureRequest request;
    std::string error;
    EXPECT_FALSE(ParseMeasureRequest(args, &request, &error)) << message;
    EXPECT_EQ(error, message);
  }
}

// Note [Parse once]: given its variant resolved, a spawned child measures it without the scenario file,
// which here does not even exist; without it, the child loads the file a user named.
TEST(ChildProtocol, AChildGivenItsVariantFileNeverReadsTheScenarioFile) {
  testing::ScratchFolder folder("child-protocol");
  Scenario tiny;
  std::string error;
  ASSERT_TRUE(LoadScenarioText(R"({"name": "tiny", "summary": "s",
    "model": {"layers": [{"kind": "linear", "in": 4, "out": 8}, {"kind": "relu"}, {"kind": "linear", "in": 8, "out": 2}]},
    "data": {"batch": 3, "shape": [4], "on_host": false},
    "variants": {"base": {}, "wider": {"data": {"batch": 6}}}})",
                               "tiny.json", &tiny, &error))
      << error;
  MeasureRequest request;
  request.scenario_file = folder.path() + "/gone.json";
  request.variant = "wider";
  request.variant_file = folder.Write("1.variant.json", tiny.variants[1].document);
  request.backend = "cpu";
  request.out_path = folder.path() + "/1.json";
  std::ostringstream err;
  ASSERT_EQ(MeasureInChild(request, err), kExitOk) << err.str();
  const nlohmann::json m = nlohmann::json::parse(testing::Contents(request.out_path));
  EXPECT_EQ(m["param_bytes"], (4 * 8 + 8 + 8 * 2 + 2) * 4);

  request.variant_file.clear();
  EXPECT_EQ(MeasureInChild(request, err), kExitUsage);
  EXPECT_NE(err.str().find(request.scenario_file + ": cannot read"), std::string::npos) << err.str();
}

TEST(ChildProtocolDeathTest, ARequestWithoutItsRequiredFieldsIsABug) {
  EXPECT_DEATH((void)ChildArgv("self", MeasureRequest{}),
               "a measure request needs a scenario file, a variant, a backend and an output path");
}

}  // namespace
}  // namespace oomguard
