// The CSV writer (reports/csv_writer.h): a golden file from the machine-free fixture, and exact checks
// of the quoting and formula rules. Rewrite the golden file with
//   OOMGUARD_UPDATE_GOLDEN=1 build/tests/oomguard_plain_tests --gtest_filter='CsvReport*'
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "reports/csv_writer.h"
#include "reports/report_registry.h"
#include "tests/golden_file.h"
#include "tests/report_fixture.h"

namespace oomguard {
namespace {

std::vector<std::string> Lines(const std::string& csv) {
  std::vector<std::string> lines;
  for (size_t start = 0; start < csv.size();) {
    const size_t end = csv.find("\r\n", start);
    lines.push_back(csv.substr(start, end - start));
    start = end == std::string::npos ? csv.size() : end + 2;
  }
  return lines;
}

TEST(CsvReport, MatchesGolden) { testing::ExpectMatchesGolden("sample.csv", RenderCsv(testing::SampleReport())); }

TEST(CsvReport, OneRowPerVariantAndOneForAScenarioWithoutVariants) {
  const RunResults report = testing::SampleReport();
  size_t rows = 1;  // the header
  for (const ScenarioResult& s : report.scenarios) rows += s.variants.empty() ? 1 : s.variants.size();
  const std::string csv = RenderCsv(report);
  EXPECT_EQ(Lines(csv).size(), rows);
  EXPECT_EQ(Lines(csv).front(),
            "scenario,variant,backend,card,cap_bytes,result,outcome,peak_bytes,peak_phase,live_after_last_bytes,"
            "baseline_peak_bytes,peak_delta_bytes,peak_delta_percent,baseline_verdict");
}

TEST(CsvReport, QuotesCommasQuotesAndLineBreaksAndDisarmsFormulas) {
  RunResults report;
  ScenarioResult s;
  s.name = "a,\"b\"\nc";
  s.backend = "cpu";
  s.code = ResultCode::kUnresolved;
  report.scenarios.push_back(s);
  s.name = "=cmd()";
  s.card = "-T4";
  s.cap_bytes = 100;
  report.scenarios.push_back(s);
  const std::string csv = RenderCsv(report);
  EXPECT_EQ(csv.substr(csv.find("\r\n") + 2),
            "\"a,\"\"b\"\"\nc\",,cpu,,,UNRESOLVED,,,,,,,,\r\n"
            "'=cmd(),,cpu,'-T4,100,UNRESOLVED,,,,,,,,\r\n");
}

TEST(CsvReport, IsARegisteredFormat) {
  std::string error;
  EXPECT_TRUE(ValidateReportSpec("csv=out.csv", &error)) << error;
  EXPECT_FALSE(ValidateReportSpec("xlsx=out.xlsx", &error));
  EXPECT_EQ(error, "--report: expected FORMAT=FILE with FORMAT one of junit, md, html, json, csv, got 'xlsx=out.xlsx'");
}

}  // namespace
}  // namespace oomguard
