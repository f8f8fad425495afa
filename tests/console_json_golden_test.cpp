// Golden files for the console report and the JSON results file, from the fixed sample report
// (tests/report_fixture.h: no machine, time or version enters it). Regenerate after an intended change:
//   OOMGUARD_UPDATE_GOLDEN=1 build/tests/oomguard_tests --gtest_filter='ConsoleReport*:ResultsJson*'
#include <gtest/gtest.h>

#include <sstream>

#include "reports/console_writer.h"
#include "reports/results_json.h"
#include "tests/golden_file.h"
#include "tests/report_fixture.h"

namespace oomguard {
namespace {

std::string Console(const ConsoleStyle& style) {
  const RunResults report = testing::SampleReport();
  std::ostringstream out;
  for (const ScenarioResult& s : report.scenarios) WriteScenarioBlock(s, out, style);
  WriteRunSummary(report, out, style);
  return out.str();
}

TEST(ConsoleReport, MatchesGolden) { testing::ExpectMatchesGolden("sample.console.txt", Console({})); }

TEST(ConsoleReport, PlainUnlessColourIsAsked) {
  EXPECT_EQ(Console({}).find('\033'), std::string::npos);
  const std::string coloured = Console({/*color=*/true, /*detailed=*/false});
  EXPECT_NE(coloured.find("\033[31mFAIL"), std::string::npos);
  EXPECT_NE(coloured.find("\033[32mPASS"), std::string::npos);
}

TEST(ConsoleReport, TheRegressionIsReportedWithItsDelta) {
  const std::string text = Console({});
  EXPECT_NE(text.find("regression: peak_bytes 18.00 MiB vs baseline 16.20 MiB (+1.80 MiB, +11.11%)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("a<b>&c       cpu      NVIDIA T4 16GB  FAIL"), std::string::npos) << text;
}

// What --filter did not select is counted in the totals, never listed: no block, no table row.
TEST(ConsoleReport, SkippedScenariosAreCountedNotListed) {
  RunResults report = testing::SampleReport();
  std::ostringstream plain;
  WriteRunSummary(report, plain, {});
  ScenarioResult skipped;
  skipped.name = "not-me";
  skipped.backend = "cpu";
  skipped.code = ResultCode::kSkipped;
  skipped.error = "not selected by --filter 'a*'";
  report.skipped = {skipped, skipped};
  std::ostringstream out;
  WriteRunSummary(report, out, {});
  std::string expected = plain.str();
  const std::string totals = "4 scenarios on cpu in 4.2 s: 1 FAIL 1 PASS 1 UNRESOLVED 1 UNSUPPORTED  (2 failing)";
  ASSERT_NE(expected.find(totals), std::string::npos) << expected;
  expected.replace(expected.find(totals), totals.size(),
                   "6 scenarios on cpu in 4.2 s: 1 FAIL 1 PASS 2 SKIPPED 1 UNRESOLVED 1 UNSUPPORTED  (2 failing)");
  EXPECT_EQ(out.str(), expected);
}

// A shard says under the totals how much of the run it took; an unsharded run says nothing of shards.
TEST(ConsoleReport, AShardSaysHowManyOfTheRunsFilesItTook) {
  RunResults report = testing::SampleReport();
  std::ostringstream plain;
  WriteRunSummary(report, plain, {});
  report.shard = {Shard{2, 3}, 6, 17, 17};
  std::ostringstream out;
  WriteRunSummary(report, out, {});
  std::string expected = plain.str();
  const std::string totals = "4 scenarios on cpu in 4.2 s: 1 FAIL 1 PASS 1 UNRESOLVED 1 UNSUPPORTED  (2 failing)\n";
  ASSERT_NE(expected.find(totals), std::string::npos) << expected;
  expected.insert(expected.find(totals) + totals.size(), "shard 2/3: 6 of 17 scenario files\n");
  EXPECT_EQ(out.str(), expected);
  EXPECT_EQ(plain.str().find("shard"), std::string::npos);
}

// Where the run's time went: its wall time against its measurements' per job, and how children started.
TEST(ConsoleReport, TheTimeLineComparesTheWallWithTheMeasurementsPerJob) {
  RunResults report = testing::SampleReport();
  report.jobs = 2;
  report.children = "spawned";
  report.children_reason = "OOMGUARD_SPAWN_CHILDREN is set";
  const RunOverhead o = OverheadOf(report);
  EXPECT_EQ(o.measured_ms, 1000.0);  // four measurements of 250 ms
  EXPECT_EQ(o.children_ms, 2400.0);  // the scenarios' 1.5 s and 0.9 s
  EXPECT_EQ(o.wall_per_measured, 4200.0 / (1000.0 / 2));
  std::ostringstream out;
  WriteRunSummary(report, out, {});
  EXPECT_NE(out.str().find("\ntime: 4.2 s wall for 1.0 s of measurement at 2 jobs: 8.40x what the measurements take "
                           "(children spawned: OOMGUARD_SPAWN_CHILDREN is set)\n"),
            std::string::npos)
      << out.str();
  report.children.clear();  // not a runner's run (an in-process Measure): no line
  std::ostringstream none;
  WriteRunSummary(report, none, {});
  EXPECT_EQ(none.str().find("time: "), std::string::npos);
}

// The results file holds what ran: the SKIPPED scenarios are left out.
TEST(ResultsJson, LeavesSkippedScenariosOut) {
  RunResults report = testing::SampleReport();
  const nlohmann::json before = ResultsToJson(report);
  report.skipped.resize(1);
  report.skipped[0].name = "not-me";
  report.skipped[0].code = ResultCode::kSkipped;
  EXPECT_EQ(ResultsToJson(report), before);
}

TEST(ConsoleReport, ACudaRunShowsTheAllocatorsPeaksRetriesAndTransferTime) {
  RunResults report = testing::SampleReport();
  ScenarioResult s = report.scenarios.front();
  VariantMeasurement& m = *s.variants.front().measurement;
  m.cuda = CudaMeasurement{48 << 20, 64 << 20, 48 << 20, (48 << 20) - 4096, 1, 0, {}};
  m.cuda->allocated_at_start_bytes = 32 << 20;
  m.cuda->timed_transfers = 4;
  m.cuda->transfer_ms = 1.5;
  std::ostringstream out;
  WriteScenarioBlock(s, out, {});
  EXPECT_NE(out.str().find("\n              cuda allocator: allocated 48.00 MiB, reserved 64.00 MiB (fragmentation "
                           "16.00 MiB), 1 retry, 0 OOMs; peaks include 32.00 MiB held from the start (library "
                           "workspaces); 4 host-to-device copies took 1.500 ms\n"),
            std::string::npos)
      << out.str();
}

TEST(ResultsJson, MatchesGolden) {
  testing::ExpectMatchesGolden("sample.results.json", ResultsToJson(testing::SampleReport()).dump(2) + "\n");
}

TEST(ResultsJson, CarriesTheBaselineDiffAndTheSchemaVersion) {
  const nlohmann::json j = ResultsToJson(testing::SampleReport());
  EXPECT_EQ(j.at("schema_version"), kResultsSchemaVersion);
  const nlohmann::json& regressed = j.at("scenarios").at(1).at("variants").at(0);
  EXPECT_EQ(regressed.at("name"), "a<b>&c");
  EXPECT_EQ(regressed.at("result"), "FAIL");
  EXPECT_EQ(regressed.at("baseline").at("verdict"), "regressed");
  EXPECT_EQ(regressed.at("baseline").at("metrics").at(0).at("delta"), 1887437);
}

}  // namespace
}  // namespace oomguard
