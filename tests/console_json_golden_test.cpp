// Golden files for the console report and the JSON results file, from the fixed sample report
// (tests/report_fixture.h: no machine, time or version enters it). Regenerate after an intended change:
//   OOMGUARD_UPDATE_GOLDEN=1 build/tests/oomguard_tests --gtest_filter='ConsoleReport*:ResultsJson*'
#include <sstream>

#include <gtest/gtest.h>

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
