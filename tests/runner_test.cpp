// The runner end to end: child processes of the real CLI, isolation from crashes and hangs, broken
// files, and results that do not depend on --jobs (its baseline updates: baseline_update_test.cpp).
#include "run/runner.h"

#include <gtest/gtest.h>
#include <unistd.h>


#include "backends/backend.h"
#include "cli_result.h"
#include "reports/console_writer.h"
#include "reports/junit_writer.h"
#include "reports/results_json.h"
#include "scenario/scenario_loader.h"
#include "runner_fixture.h"
#include "scoped_environment.h"
#include "scratch_folder.h"

namespace oomguard {
namespace {

TEST_F(RunnerTest, RunsEveryVariantAndJudgesTheRelations) {
  RunOptions options;
  options.paths = {Write("tiny.json", kTinyScenario)};
  const RunResults report = Run(options);
  ASSERT_EQ(report.scenarios.size(), 1u);
  const ScenarioResult& s = report.scenarios[0];
  EXPECT_EQ(s.code, ResultCode::kPass) << s.error;
  ASSERT_EQ(s.variants.size(), 2u);
  EXPECT_EQ(s.variants[0].measurement->param_bytes, 232);
  EXPECT_EQ(s.card, "NVIDIA T4 16GB");  // the default card
  ASSERT_EQ(s.checks.size(), 1u);
  EXPECT_TRUE(s.checks[0].holds) << s.checks[0].explanation;
}

TEST_F(RunnerTest, BrokenFilesAreUnresolvedWhileTheRestRuns) {
  RunOptions options;
  options.paths = {dir_};
  Write("a_syntax.json", "{\n  \"name\": \"broken\",\n  \"summary\": oops\n}\n");
  Write("b_tiny.json", kTinyScenario);
  const RunResults report = Run(options);
  ASSERT_EQ(report.scenarios.size(), 2u);
  EXPECT_EQ(report.scenarios[0].code, ResultCode::kUnresolved);
  EXPECT_EQ(report.scenarios[0].name, "a_syntax");
  EXPECT_NE(report.scenarios[0].error.find(dir_ + "/a_syntax.json:3:"), std::string::npos) << report.scenarios[0].error;
  EXPECT_EQ(report.scenarios[1].code, ResultCode::kPass);
}

TEST_F(RunnerTest, ResultsFilesInScannedFoldersAreSkippedAndDuplicateNamesRefused) {
  RunOptions options;
  options.paths = {dir_};
  options.json_path = dir_ + "/results.json";
  Write("a.json", kTinyScenario);
  Write("b.json", kTinyScenario);
  RunResults first = Run(options);
  std::string error;
  ASSERT_TRUE(WriteResultsJson(first, options.json_path, &error)) << error;
  const RunResults second = Run(options);
  ASSERT_EQ(second.scenarios.size(), 2u);  // results.json is not read as a scenario
  EXPECT_EQ(second.scenarios[0].code, ResultCode::kPass);
  EXPECT_EQ(second.scenarios[1].code, ResultCode::kUnresolved);
  EXPECT_EQ(second.scenarios[1].error, dir_ + "/b.json: scenario name 'tiny' is already used by " + dir_ + "/a.json");
}

TEST_F(RunnerTest, NotMeasuredIsNotZero) {
  std::string scenario = kTinyScenario;
  scenario.replace(scenario.find("wider.peak > base.peak"), 22, "wider.forward_saved_bytes > base.forward_saved_bytes");
  RunOptions options;
  options.paths = {Write("tiny.json", scenario)};
  options.cap = "300B";  // room for the parameters (232 bytes), not for a forward
  const RunResults report = Run(options);
  const VariantMeasurement& m = *report.scenarios[0].variants[0].measurement;
  EXPECT_EQ(Name(m.outcome), "oom");
  EXPECT_FALSE(m.forward_saved_bytes.has_value());
  EXPECT_FALSE(m.grad_bytes.has_value());
  EXPECT_FALSE(m.optimizer_state_bytes.has_value());
  EXPECT_TRUE(m.iterations.empty());
  ASSERT_EQ(report.scenarios[0].checks.size(), 1u);
  EXPECT_FALSE(report.scenarios[0].checks[0].evaluable);
  EXPECT_EQ(report.scenarios[0].checks[0].explanation,
            "wider.forward_saved_bytes > base.forward_saved_bytes: cannot evaluate: no measurement of "
            "wider.forward_saved_bytes, base.forward_saved_bytes");
  EXPECT_EQ(report.scenarios[0].code, ResultCode::kFail);
}

TEST_F(RunnerTest, ACrashingChildIsUnresolvedAndTheRunCompletes) {
  RunOptions options;
  options.paths = {Write("tiny.json", kTinyScenario)};
  options.spawn_children = true;  // the child is this script (forked children: warm_children_test.cpp)
  const std::string crasher = Write("crash.sh", "#!/bin/sh\nkill -SEGV $$\n", /*executable=*/true);
  const RunResults report = Run(options, crasher);
  ASSERT_EQ(report.scenarios.size(), 1u);
  EXPECT_EQ(report.scenarios[0].code, ResultCode::kUnresolved);
  for (const VariantResult& v : report.scenarios[0].variants) {
    EXPECT_EQ(v.code, ResultCode::kUnresolved);
    ASSERT_EQ(v.reasons.size(), 1u);
    EXPECT_EQ(v.reasons[0], "crashed with signal 11 (Segmentation fault)");
  }
}

// Note [Parse once]: a spawned child is handed its variant resolved, as a file of that variant alone,
// and --scenario only to name the file. The child here is a script that keeps what it was given.
TEST_F(RunnerTest, ASpawnedChildIsGivenItsVariantAloneAlreadyResolved) {
  RunOptions options;
  const std::string scenario_file = Write("tiny.json", kTinyScenario);
  options.paths = {scenario_file};
  options.spawn_children = true;
  std::string script = R"(#!/bin/sh
while [ $# -gt 0 ]; do
  [ "$1" = --variant ] && variant=$2
  [ "$1" = --scenario ] && scenario=$2
  [ "$1" = --variant-file ] && cp "$2" "DIR/given-$variant.json"
  shift
done
echo "$scenario" > "DIR/scenario-$variant.txt"
exit 3
)";
  for (size_t at; (at = script.find("DIR")) != std::string::npos;) script.replace(at, 3, dir_);
  const std::string keeper = Write("keep.sh", script, /*executable=*/true);
  const RunResults report = Run(options, keeper);
  EXPECT_EQ(report.scenarios[0].code, ResultCode::kUnresolved);
  Scenario tiny;
  std::string error;
  ASSERT_TRUE(LoadScenarioFile(scenario_file, &tiny, &error)) << error;
  ASSERT_EQ(tiny.variants.size(), 2u);
  for (const VariantSpec& v : tiny.variants) {
    EXPECT_EQ(testing::Contents(dir_ + "/given-" + v.name + ".json"), v.document) << v.name;
    EXPECT_EQ(testing::Contents(dir_ + "/scenario-" + v.name + ".txt"), scenario_file + "\n");
  }
}

TEST_F(RunnerTest, AHangingChildTimesOut) {
  RunOptions options;
  options.paths = {Write("tiny.json", kTinyScenario)};
  options.timeout_seconds = 1;
  options.spawn_children = true;
  const std::string sleeper = Write("hang.sh", "#!/bin/sh\nexec sleep 30\n", /*executable=*/true);
  const RunResults report = Run(options, sleeper);
  EXPECT_EQ(report.scenarios[0].code, ResultCode::kTimeout);
  EXPECT_EQ(report.scenarios[0].variants[0].reasons[0], "timed out after 1 s");
}

// D23 (issue 35): a child's measurement above the 16 MiB input limit was UNRESOLVED "exit code 0",
// without a reason. Whatever the child wrote that cannot be read is named, with its size and the limit.
TEST_F(RunnerTest, AMeasurementThatCannotBeReadSaysWhy) {
  RunOptions options;
  std::string tiny = kTinyScenario;
  tiny.replace(tiny.find("\"checks\""), tiny.find(']', tiny.find("\"checks\"")) + 1 - tiny.find("\"checks\""),
               "\"checks\": []");
  options.paths = {Write("tiny.json", tiny)};
  options.spawn_children = true;
  // A sparse file of 17 MiB at --out, and exit 0.
  const std::string writer = Write("huge.sh", R"(#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
truncate -s 17M "$out"
)",
                                   /*executable=*/true);
  const RunResults report = Run(options, writer);
  ASSERT_EQ(report.scenarios.size(), 1u);
  for (const VariantResult& v : report.scenarios[0].variants) {
    EXPECT_EQ(v.code, ResultCode::kUnresolved);
    ASSERT_EQ(v.reasons.size(), 1u);
    const std::string& reason = v.reasons[0];
    EXPECT_EQ(reason.rfind("exit code 0, but its measurement cannot be read: /", 0), 0u) << reason;
    EXPECT_NE(reason.find(".json: too large (17.00 MiB; the limit for input files is 16.00 MiB)"), std::string::npos)
        << reason;
  }
}

// D23 (issue 35): 100000 iterations wrote 17.7 MB of measurement (every iteration's record, 400000
// phase marks), which the runner could not read back. Records and marks are bounded, and the
// measurement says what it left out (Note [Bounded iteration records], Note [Thinned phase marks]).
TEST_F(RunnerTest, ALongRunsMeasurementIsBoundedAndSaysWhatItLeftOut) {
  RunOptions options;
  options.paths = {Write("tiny.json", kTinyScenario)};
  options.filter = "tiny/base";
  const int64_t iterations = static_cast<int64_t>(kIterationRecordsKept) + 2;
  options.iterations = iterations;
  const RunResults report = Run(options);
  ASSERT_EQ(report.scenarios.size(), 1u);
  const VariantResult& base = report.scenarios[0].variants[0];
  ASSERT_TRUE(base.measurement) << (base.reasons.empty() ? "" : base.reasons[0]);
  const VariantMeasurement& m = *base.measurement;
  EXPECT_EQ(m.outcome.kind, Outcome::kPass);
  EXPECT_EQ(m.iterations.size(), kIterationRecordsKept);
  EXPECT_EQ(m.iterations_left_out, 2);
  EXPECT_EQ(CompletedIterations(m), iterations);
  EXPECT_NE(IterationNumbered(m, kIterationRecordsKept / 2), nullptr);
  EXPECT_EQ(IterationNumbered(m, kIterationRecordsKept / 2 + 1), nullptr);  // left out
  EXPECT_EQ(IterationNumbered(m, iterations), &m.iterations.back());
  // setup, then four phase changes in each iteration; every kept mark keeps its phase's name.
  EXPECT_EQ(m.ledger.phase_marks_recorded, 1 + 4 * iterations);
  for (const PhaseMark& mark : m.ledger.phase_marks) EXPECT_FALSE(mark.phase.empty()) << mark.event_index;
  EXPECT_LE(m.ledger.phase_marks.size(), 2 * 2000u);  // twice the timeline's points (workload.h)
  EXPECT_EQ(m.ledger.phase_marks.front().event_index, 0);
  const nlohmann::json results = ResultsToJson(report);
  const nlohmann::json& written = results["scenarios"][0]["variants"][0]["measurement"];
  EXPECT_EQ(written["iterations_left_out"], 2);
  EXPECT_EQ(written["timeline"]["phases_recorded"], 1 + 4 * iterations);
}

// D27 (issue 35): a TMPDIR that is set but unusable silently became /tmp; it is an input error.
TEST_F(RunnerTest, AnUnusableTmpdirIsAnErrorNamingIt) {
  testing::ScopedEnvironment env({"TMPDIR"});
  env.Set("TMPDIR", "relative/dir");
  const testing::CliResult r = testing::Cli({"run", Write("tiny.json", kTinyScenario)});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: TMPDIR=relative/dir: not an absolute path\n");
}

// D27 (issue 35): a child that could not write its measurement (a full TMPDIR) was UNRESOLVED "exit
// code 2" with nothing on its stderr. A file size limit of 1 KiB stands in for the full disk here: the
// measurement does not fit, the child's one line of stderr does.
TEST_F(RunnerTest, AChildThatCannotWriteItsMeasurementSaysWhy) {
  RunOptions options;
  options.paths = {Write("tiny.json", kTinyScenario)};
  options.filter = "tiny/base";
  options.spawn_children = true;
  const std::string limited = Write("limited.sh", std::string(R"(#!/bin/bash
trap '' XFSZ
ulimit -f 1
exec )") + OOMGUARD_EXE + " \"$@\"\n",
                                    /*executable=*/true);
  const RunResults report = Run(options, limited);
  ASSERT_EQ(report.scenarios.size(), 1u);
  const VariantResult& base = report.scenarios[0].variants[0];
  EXPECT_EQ(base.code, ResultCode::kUnresolved);
  ASSERT_EQ(base.reasons.size(), 1u);
  EXPECT_EQ(base.reasons[0], "exit code 4: it could not write its measurement (its stderr says why)");
  EXPECT_EQ(base.diagnostics.rfind("cannot write /", 0), 0u) << base.diagnostics;
  EXPECT_NE(base.diagnostics.find(".json: File too large\n"), std::string::npos) << base.diagnostics;
}

TEST_F(RunnerTest, WhatTheFilterDoesNotSelectIsSkippedApartAndNeverReported) {
  std::string other = kTinyScenario;
  other.replace(other.find("\"tiny\""), 6, "\"other\"");
  Write("a.json", kTinyScenario);
  Write("b.json", other);
  RunOptions options;
  options.paths = {dir_};
  options.filter = "t*";
  RunResults report;
  std::string error;
  std::vector<std::string> done;
  ASSERT_TRUE(RunScenarios(
      options, OOMGUARD_EXE, [&](const ScenarioResult& s) { done.push_back(s.name); }, &report, &error))
      << error;
  EXPECT_EQ(done, std::vector<std::string>{"tiny"});
  ASSERT_EQ(report.scenarios.size(), 1u);
  EXPECT_EQ(report.scenarios[0].code, ResultCode::kPass);
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_EQ(report.skipped[0].name, "other");
  EXPECT_EQ(report.skipped[0].code, ResultCode::kSkipped);
  EXPECT_EQ(report.skipped[0].error, "not selected by --filter 't*'");
  EXPECT_TRUE(report.skipped[0].variants.empty());
  options.filter = "*";
  EXPECT_TRUE(Run(options).skipped.empty());
}

TEST_F(RunnerTest, UnknownBackendsOfAScenarioAreUnsupported) {
  RunOptions options;
  options.paths = {Write("tiny.json", kTinyScenario)};
  options.backend = "meta";
  const RunResults report = Run(options);
  EXPECT_EQ(report.scenarios[0].code, ResultCode::kUnsupported);
  EXPECT_EQ(report.scenarios[0].error, "runs on cpu, not meta (run it with --backend cpu)");
}

// Note [Ranks need a GPU each] (run/rank_children.h): on this machine's GPUs (none on CI's, one on the
// lent H200), a world of 2 on cuda is UNSUPPORTED with its reason, on the console and in JUnit.
TEST_F(RunnerTest, CudaRanksBeyondTheMachinesGpusAreUnsupportedWithTheReasonInEveryReport) {
  const BackendDriver& cuda = GetBackend(Backend::kCuda);
  if (!cuda.compiled_in()) GTEST_SKIP() << "this build has no cuda backend";
  const int gpus = cuda.DeviceCount();
  if (gpus >= 2) GTEST_SKIP() << gpus << " GPUs: the ranks run";
  std::string scenario = kTinyScenario;
  scenario.insert(scenario.find('{') + 1,
                  R"("parallel": {"world": 2, "strategy": "ddp"}, "backends": ["cpu", "cuda"], )");
  RunOptions options;
  options.paths = {Write("tiny.json", scenario)};
  options.backend = "cuda";
  const RunResults report = Run(options);
  ASSERT_EQ(report.scenarios.size(), 1u);
  const std::string why = "needs 2 GPUs for NCCL ranks, this machine has " + std::to_string(gpus) +
                          " (--backend meta simulates one rank at any world; --backend cpu runs 2 real ranks on Gloo)";
  EXPECT_EQ(report.scenarios[0].code, ResultCode::kUnsupported);
  EXPECT_EQ(report.scenarios[0].error, why);
  std::ostringstream console;
  WriteScenarioBlock(report.scenarios[0], console);
  EXPECT_NE(console.str().find("UNSUPPORTED tiny"), std::string::npos) << console.str();
  EXPECT_NE(console.str().find(why), std::string::npos) << console.str();
  EXPECT_NE(RenderJUnit(report).find("<skipped message=\"" + why + "\" type=\"UNSUPPORTED\">"), std::string::npos)
      << RenderJUnit(report);
}

// Drops what legitimately differs between two runs: how long things took.
void StripDurations(nlohmann::json& j) {
  if (j.is_object()) {
    j.erase("duration_ms");
    j.erase("jobs");
    j.erase("overhead");
    j.erase("children");
    j.erase("children_reason");
    for (auto& [key, value] : j.items()) StripDurations(value);
  } else if (j.is_array()) {
    for (auto& value : j) StripDurations(value);
  }
}

// Spawned children, one at a time, against children forked warm from this process, two at a time
// (Note [Warm children]): the same numbers, to the byte.
TEST(Runner, TheCatalogPassesAndJobsAndForkedChildrenDoNotChangeANumber) {
  RunOptions options;
  options.paths = {std::string(OOMGUARD_SOURCE_DIR) + "/scenarios"};
  RunResults one, two;
  std::string error;
  options.spawn_children = true;
  ASSERT_TRUE(RunScenarios(options, OOMGUARD_EXE, nullptr, &one, &error)) << error;
  EXPECT_EQ(one.children, "spawned");
  options.spawn_children = false;
  options.jobs = 2;
  ASSERT_TRUE(RunScenarios(options, OOMGUARD_EXE, nullptr, &two, &error)) << error;
  EXPECT_EQ(two.children, "forked") << two.children_reason;
  ASSERT_GE(one.scenarios.size(), 7u);
  int passed = 0;
  for (const ScenarioResult& s : one.scenarios) {
    // The big-model scenarios run on meta only: UNSUPPORTED on cpu, everything else passes.
    const bool meta_only = s.error.find("runs on meta, not cpu") != std::string::npos;
    EXPECT_EQ(s.code, meta_only ? ResultCode::kUnsupported : ResultCode::kPass) << s.name << ": " << s.error;
    passed += s.code == ResultCode::kPass;
  }
  EXPECT_GE(passed, 13);
  nlohmann::json a = ResultsToJson(one), b = ResultsToJson(two);
  StripDurations(a);
  StripDurations(b);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace oomguard
