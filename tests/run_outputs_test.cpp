// `oomguard run` as CI meets it when something is wrong (issue 14): outputs checked before the run and
// written independently after it, exit codes that say both, an update that a bad baseline does not
// stop, faults that never fired, caps the host cannot back, and OOM reports that agree with themselves.
// Through the CLI, with the real oomguard as the children.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/byte_size.h"
#include "base/exit_codes.h"
#include "base/host_memory.h"
#include "cli/cli.h"
#include "tests/cli_result.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

using testing::Cli;
using testing::CliResult;
using testing::Contents;
using testing::Exists;

// A tiny scenario on cpu: 2 iterations of one linear layer, 24 allocation requests in all.
std::string Tiny(const std::string& name, const std::string& extra = "") {
  return R"({"name": ")" + name + R"(", "summary": "tiny", "backends": ["cpu", "meta"],
    "model": {"layers": [{"kind": "linear", "in": 8, "out": 8}]}, "data": {"batch": 4, "shape": [8], "classes": 8},
    "loop": {"iterations": 2, "loss": "cross_entropy"}, )" +
         extra + R"("variants": {"a": {}}})";
}

class RunOutputsTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("OOMGUARD_SELF", OOMGUARD_EXE, 1); }
  void TearDown() override { unsetenv("OOMGUARD_SELF"); }
  testing::ScratchFolder folder_{"run-outputs"};
  const std::string dir_ = folder_.path();
};

// D9: output paths were checked only after the whole run.
TEST_F(RunOutputsTest, EveryOutputPathIsCheckedBeforeAnythingRuns) {
  const std::string scenario = folder_.Write("tiny.json", Tiny("tiny"));
  CliResult r = Cli({"run", scenario, "--report", "junit=" + dir_ + "/tiny.json/x.xml"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err,
            "oomguard run: --report junit=" + dir_ + "/tiny.json/x.xml: " + dir_ + "/tiny.json is not a folder\n");
  EXPECT_EQ(r.out, "");  // nothing ran
  r = Cli({"run", scenario, "--json", dir_});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: --json " + dir_ + ": is a folder; expected a file name\n");
  r = Cli({"run", scenario, "--report", "md=" + dir_ + "/new/sub/summary.md"});  // folders are created
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(Exists(dir_ + "/new/sub/summary.md"));
}

// D9: one failing report stopped the later ones, and exit 2 hid the run's code.
TEST_F(RunOutputsTest, AReportThatFailsDoesNotStopTheOthersAndTheCodeSaysBoth) {
  const std::string scenario = folder_.Write("tiny.json", Tiny("tiny"));
  CliResult r = Cli({"run", scenario, "--report", "md=/dev/full", "--report", "junit=" + dir_ + "/j.xml", "--json",
                     dir_ + "/r.json"});
  EXPECT_EQ(r.code, kExitOk + kExitOutputFailed);
  EXPECT_EQ(r.err,
            "oomguard run: cannot write /dev/full: No space left on device\n"
            "oomguard run: exit 4: the run passed, and an output above could not be written\n");
  EXPECT_TRUE(Exists(dir_ + "/j.xml"));
  EXPECT_TRUE(Exists(dir_ + "/r.json"));
  const std::string failing =
      folder_.Write("failing.json", Tiny("failing", R"("expect": {"a": {"checks": ["peak < 1"]}}, )"));
  r = Cli({"run", failing, "--report", "md=/dev/full"});
  EXPECT_EQ(r.code, kExitFailures + kExitOutputFailed);
  EXPECT_NE(r.err.find("exit 5: the run failed, and an output above could not be written\n"), std::string::npos);
}

// D8: CLI::Range let nan through, which turned the timeout off.
TEST_F(RunOutputsTest, ATimeoutMustBeAFiniteNumber) {
  for (const std::string value : {"nan", "inf", "0.5", "1e9"}) {
    const CliResult r = Cli({"run", "--timeout", value});
    EXPECT_EQ(r.code, kExitUsage) << value;
    EXPECT_NE(r.err.find("expected a number in [1, 86400], got '" + value + "'"), std::string::npos) << r.err;
  }
}

// D10, D11: one unreadable baseline stopped the update half-way, and the summary still suggested one.
TEST_F(RunOutputsTest, AnUnreadableBaselineIsPassedOverAndTheOthersAreWritten) {
  folder_.Write("a.json", Tiny("alpha"));
  folder_.Write("b.json", Tiny("beta"));
  ASSERT_EQ(mkdir((dir_ + "/baselines").c_str(), 0755), 0);
  ASSERT_EQ(symlink("alpha.json", (dir_ + "/baselines/alpha.json").c_str()), 0);  // a link to itself: a loop
  CliResult r = Cli({"run", dir_, "--update-baselines"});
  EXPECT_EQ(r.code, kExitFailures + kExitOutputFailed) << r.out << r.err;
  EXPECT_NE(r.out.find("  not written alpha: " + dir_ +
                       "/baselines/alpha.json: cannot read: Too many levels of "
                       "symbolic links\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("baselines: 1 file(s) written, 1 not (alpha)\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--update-baselines records them"), std::string::npos) << r.out;
  EXPECT_TRUE(Exists(dir_ + "/baselines/beta.json"));
  struct stat info {};
  ASSERT_EQ(lstat((dir_ + "/baselines/alpha.json").c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));  // never overwritten
}

// D7: a fault that never fired passed with exit 0.
TEST_F(RunOutputsTest, AVariantInWhichTheInjectedFaultNeverFiredFails) {
  const std::string scenario = folder_.Write("tiny.json", Tiny("tiny"));
  CliResult r = Cli({"run", scenario, "--inject", "nth=100000", "--json", dir_ + "/r.json"});
  EXPECT_EQ(r.code, kExitFailures) << r.out << r.err;
  EXPECT_NE(r.out.find("--inject nth=100000 never fired: it saw 24 allocation requests and failed none (a fault that "
                       "never fires tests nothing)"),
            std::string::npos)
      << r.out;
  const nlohmann::json m =
      nlohmann::json::parse(Contents(dir_ + "/r.json"))["scenarios"][0]["variants"][0]["measurement"];
  EXPECT_EQ(m["injection"], (nlohmann::json{{"spec", "nth=100000"}, {"requests_seen", 24}}));
  r = Cli({"run", scenario, "--inject", "phase=bakward"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err,
            "oomguard run: --inject: invalid fault spec 'phase=bakward': unknown phase 'bakward'; did you mean "
            "'backward'? (phases: setup, transfer, forward, backward, optimizer, zero_grad, eval, step)\n");
}

// D15: an injected failure was not counted, and an OOM'd variant was compared with its baseline.
TEST_F(RunOutputsTest, AnOomReportAgreesWithItself) {
  const std::string scenario = folder_.Write("tiny.json", Tiny("tiny"));
  ASSERT_EQ(Cli({"run", scenario, "--update-baselines"}).code, kExitOk);
  CliResult r = Cli({"run", scenario, "--inject", "nth=20", "--json", dir_ + "/r.json"});
  EXPECT_EQ(r.code, kExitFailures);
  const nlohmann::json v = nlohmann::json::parse(Contents(dir_ + "/r.json"))["scenarios"][0]["variants"][0];
  EXPECT_EQ(v["measurement"]["outcome"], "oom");
  EXPECT_EQ(v["measurement"]["failed_allocations"], 1);
  EXPECT_EQ(v["baseline"]["verdict"], "not compared") << v["baseline"];
  EXPECT_EQ(r.out.find("improved"), std::string::npos) << r.out;
  const nlohmann::json& live = v["measurement"]["oom"]["live"];
  EXPECT_EQ(live["parameters_bytes"].get<int64_t>() + live["gradients_bytes"].get<int64_t>() +
                live["optimizer_state_bytes"].get<int64_t>() + live["inputs_bytes"].get<int64_t>() +
                live["activations_and_transient_bytes"].get<int64_t>(),
            v["measurement"]["oom"]["live_bytes"].get<int64_t>());
}

// D6: --card h200 on cpu handed 139 GiB to the host without a word; a 1 PB host batch was error:error.
TEST_F(RunOutputsTest, TheHostIsPartOfTheCapOnCpu) {
  const std::string scenario = folder_.Write("tiny.json", Tiny("tiny"));
  const HostMemory host = ReadHostMemory();
  ASSERT_GT(host.total_bytes, 0);
  const std::string too_big = std::to_string(host.total_bytes + 1);
  CliResult r = Cli({"run", scenario, "--backend", "cpu", "--cap", too_big});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: --cap " + too_big + ": the cap of " + FormatBytes(host.total_bytes + 1) +
                       " is more than this host's " + FormatBytes(host.total_bytes) +
                       " of memory, and the cpu backend holds what it measures in host memory; use --backend meta "
                       "(shapes only, any size), or a smaller --card or --cap\n");
  EXPECT_EQ(Cli({"run", scenario, "--backend", "meta", "--cap", too_big}).code, kExitOk);  // meta holds no data

  const std::string huge =
      folder_.Write("huge.json", R"({"name": "huge", "summary": "a petabyte batch on the host", "backends": ["cpu"],
    "model": {"layers": [{"kind": "linear", "in": 8, "out": 8}]}, "data": {"batch": 31250000000000, "shape": [8]},
    "loop": {"iterations": 1, "loss": "mean"}, "variants": {"a": {}}, "expect": {"a": {"outcome": "oom"}}})");
  r = Cli({"run", huge, "--backend", "cpu", "--cap", "1GiB", "--json", dir_ + "/h.json"});
  EXPECT_EQ(r.code, kExitOk) << r.out << r.err;
  const nlohmann::json m =
      nlohmann::json::parse(Contents(dir_ + "/h.json"))["scenarios"][0]["variants"][0]["measurement"];
  EXPECT_EQ(m["outcome"], "oom");
  EXPECT_EQ(m["oom"]["phase"], "transfer");
  EXPECT_EQ(m["oom"]["requested_bytes"], int64_t{1000000000000000});
  EXPECT_EQ(
      m["error"].get<std::string>().rfind("Host out of memory: tried to allocate 931322.57 GiB of host-side input "
                                          "(data.on_host) with 0 bytes of it already on the host and ",
                                          0),
      0u)
      << m["error"];
}

// The exit code of `command` run by bash (for pipes and redirections of a real oomguard process).
int Bash(const std::string& command) {
  std::string quoted;
  for (const char c : command) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  const int status = std::system(("bash -c '" + quoted + "'").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// D22: a report to /dev/stdout renamed a temporary over the file behind the stream (its console output
// and everything before it gone, even with >>), and failed on a pipe with exit 4.
TEST_F(RunOutputsTest, AReportToAStandardStreamIsWrittenIntoItNeverRenamedOverIt) {
  const std::string scenario = folder_.Write("tiny.json", Tiny("tiny"));
  const std::string run = std::string(OOMGUARD_EXE) + " run " + scenario + " --backend cpu";
  const std::string log = folder_.Write("log.txt", "before\n");
  ASSERT_EQ(Bash(run + " --report md=/dev/stdout >> " + log), kExitOk);
  std::string text = Contents(log);
  EXPECT_EQ(text.rfind("before\n", 0), 0u) << text;
  const size_t totals = text.find("1 scenarios on cpu in "), table = text.find("| scenario | variant |");
  EXPECT_NE(totals, std::string::npos) << text;
  EXPECT_NE(table, std::string::npos) << text;
  EXPECT_LT(totals, table) << text;  // the report follows what the run printed
  EXPECT_TRUE(text.ends_with("\nreport: /dev/stdout\n")) << text;

  // With >, the report goes where the stream is, after the console output, not over it.
  ASSERT_EQ(Bash(run + " --report md=/proc/self/fd/1 --json /dev/stderr > " + log + " 2> " + dir_ + "/err.txt"),
            kExitOk);
  text = Contents(log);
  EXPECT_EQ(text.rfind("PASS        tiny  [cpu", 0), 0u) << text;  // the run's first line is still first
  EXPECT_LT(text.find("1 scenarios on cpu in "), text.find("| scenario | variant |")) << text;
  EXPECT_EQ(nlohmann::json::parse(Contents(dir_ + "/err.txt"))["scenarios"][0]["name"], "tiny");

  // A pipe.
  const std::string piped = dir_ + "/piped.txt";
  EXPECT_EQ(Bash(run + " --report md=/dev/stdout | cat > " + piped + "; exit ${PIPESTATUS[0]}"), kExitOk);
  EXPECT_NE(Contents(piped).find("| scenario | variant |"), std::string::npos) << Contents(piped);
}

// D26: two outputs to one file were both written, the last one winning, with "report: x.out" twice.
TEST_F(RunOutputsTest, TwoOutputsToOneFileAreRefusedNamingBoth) {
  const std::string scenario = folder_.Write("tiny.json", Tiny("tiny"));
  ASSERT_EQ(mkdir((dir_ + "/sub").c_str(), 0755), 0);
  ASSERT_EQ(symlink("x.md", (dir_ + "/link.md").c_str()), 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--report", "md=" + dir_ + "/x.out", "--report", "html=" + dir_ + "/x.out"},
       "--report md=" + dir_ + "/x.out and --report html=" + dir_ + "/x.out"},
      {{"--json", dir_ + "/r.out", "--report", "json=" + dir_ + "/r.out"},
       "--json " + dir_ + "/r.out and --report json=" + dir_ + "/r.out"},
      {{"--json", dir_ + "/r.out", "--report", "csv=" + dir_ + "/r.out"},
       "--json " + dir_ + "/r.out and --report csv=" + dir_ + "/r.out"},
      {{"--report", "md=" + dir_ + "/x.md", "--report", "md=" + dir_ + "/x.md"},
       "--report md=" + dir_ + "/x.md and --report md=" + dir_ + "/x.md"},
      {{"--report", "md=" + dir_ + "/x.md", "--report", "junit=" + dir_ + "/sub/../x.md"},
       "--report md=" + dir_ + "/x.md and --report junit=" + dir_ + "/sub/../x.md"},
      {{"--report", "md=" + dir_ + "/x.md", "--report", "junit=" + dir_ + "/link.md"},
       "--report md=" + dir_ + "/x.md and --report junit=" + dir_ + "/link.md"},
  };
  for (const auto& [flags, both] : cases) {
    std::vector<std::string> args = {"run", scenario};
    args.insert(args.end(), flags.begin(), flags.end());
    const CliResult r = Cli(args);
    EXPECT_EQ(r.code, kExitUsage) << both;
    EXPECT_EQ(r.err, "oomguard run: " + both + " write the same file; give each output a file of its own\n");
    EXPECT_EQ(r.out, "");  // nothing ran
  }
  // The same with x.md there (a symbolic link and a hard link to it are the same file).
  folder_.Write("x.md", "old");
  ASSERT_EQ(link((dir_ + "/x.md").c_str(), (dir_ + "/hard.md").c_str()), 0);
  CliResult r = Cli({"run", scenario, "--report", "md=" + dir_ + "/link.md", "--json", dir_ + "/hard.md"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: --json " + dir_ + "/hard.md and --report md=" + dir_ +
                       "/link.md write the same file; give each output a file of its own\n");
  EXPECT_EQ(Contents(dir_ + "/x.md"), "old");
  // A standard stream is appended to, so it takes any number of outputs.
  r = Cli({"run", scenario, "--report", "md=/dev/null", "--report", "csv=/dev/null"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
}

// D26: --json DIR/other.json replaced a scenario of the run with its results; the next run of DIR then
// left that file out as a results file without a word: 1 scenario instead of 2, exit 0.
TEST_F(RunOutputsTest, AnOutputThatIsAnInputOfTheRunIsRefused) {
  const std::string good = folder_.Write("good.json", Tiny("good"));
  const std::string other = folder_.Write("other.json", Tiny("other"));
  CliResult r = Cli({"run", dir_, "--json", other});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: --json " + other + " would overwrite the scenario file " + other +
                       ", which this run reads; write it elsewhere\n");
  EXPECT_EQ(Contents(other), Tiny("other"));
  r = Cli({"run", dir_, "--report", "md=" + dir_ + "/sub/../good.json"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: --report md=" + dir_ + "/sub/../good.json would overwrite the scenario file " + good +
                       ", which this run reads; write it elsewhere\n");
  EXPECT_EQ(Contents(good), Tiny("good"));
  // A baseline file, there or not yet.
  r = Cli({"run", good, "--report", "md=" + dir_ + "/baselines/good.json"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: --report md=" + dir_ + "/baselines/good.json would overwrite the baseline file " +
                       dir_ + "/baselines/good.json, which this run reads; write it elsewhere\n");
  EXPECT_FALSE(Exists(dir_ + "/baselines/good.json"));
}

// D26: a folder run left a results file out without a note, so a scenario it replaced dropped out unseen.
TEST_F(RunOutputsTest, AFolderRunNotesTheResultsFileItLeavesOut) {
  const std::string good = folder_.Write("good.json", Tiny("good"));
  ASSERT_EQ(Cli({"run", good, "--json", dir_ + "/results.json"}).code, kExitOk);
  const CliResult r = Cli({"run", dir_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("\nnote: " + dir_ +
                       "/results.json: a results file of `oomguard run --json`, not a scenario: "
                       "left out\n"),
            std::string::npos)
      << r.out;
}

// D28: snapshots that could not be written left the exit code at 0.
TEST_F(RunOutputsTest, ASnapshotThatCannotBeWrittenAddsFourToTheCode) {
  const std::string scenario = folder_.Write("tiny.json", Tiny("tiny"));
  // A folder where the snapshot file goes: the move fails whoever runs the test, root too.
  ASSERT_EQ(mkdir((dir_ + "/snaps").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir_ + "/snaps/tiny.a.cpu.pickle").c_str(), 0755), 0);
  const CliResult r = Cli({"run", scenario, "--backend", "cpu", "--snapshot-dir", dir_ + "/snaps", "--snapshot-all"});
  EXPECT_EQ(r.code, kExitOk + kExitOutputFailed) << r.out << r.err;
  EXPECT_EQ(r.err, "oomguard run: --snapshot-dir " + dir_ +
                       "/snaps: 1 snapshot(s) could not be written (see above)\n"
                       "oomguard run: exit 4: the run passed, and an output above could not be written\n");
}

// D32 (issue 35): on meta, token ids the host could not hold read "The cpu backend keeps tensors and
// host-side inputs in this host's memory: use --backend meta", to a run on meta. A host-side input is
// real data on every backend (Note [Host-side inputs are real data]): its message says what to shrink.
TEST_F(RunOutputsTest, AHostSideInputTooLargeForTheHostSaysWhatToShrinkOnMeta) {
  const std::string huge = folder_.Write("tokens.json", R"({"name": "tokens", "summary": "8 TB of token ids",
    "backends": ["meta"], "model": {"layers": [{"kind": "embedding", "vocab": 10, "dim": 4}]},
    "data": {"batch": 1, "shape": [1000000000000], "dtype": "int64", "vocab": 10},
    "loop": {"iterations": 1, "loss": "mean"}, "variants": {"a": {}}, "expect": {"a": {"outcome": "oom"}}})");
  const CliResult r = Cli({"run", huge, "--backend", "meta", "--json", dir_ + "/t.json"});
  EXPECT_EQ(r.code, kExitOk) << r.out << r.err;
  const nlohmann::json m =
      nlohmann::json::parse(Contents(dir_ + "/t.json"))["scenarios"][0]["variants"][0]["measurement"];
  EXPECT_EQ(m["outcome"], "oom");
  EXPECT_EQ(m["error"],
            "Host out of memory: tried to allocate 7450.58 GiB of host-side input, which the system allocator refused. "
            "A host-side input is real data in this host's memory on every backend, meta included: this one is too "
            "large for this host; make it smaller (data.batch, data.shape).");
}

// D17: an empty folder said "no scenario matches --filter '*'" with no filter given.
TEST_F(RunOutputsTest, AnEmptyFolderSaysSo) {
  CliResult r = Cli({"run", dir_});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: no scenario files to run\n");
}

}  // namespace
}  // namespace oomguard
