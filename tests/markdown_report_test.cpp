// Golden-file test of the Markdown writer (tests/golden/sample.md, from oomguard::testing::SampleReport(),
// compared byte for byte), plus exact checks of what a pull-request comment relies on. After an intended
// change of format:
//
//   OOMGUARD_UPDATE_GOLDEN=1 build/tests/oomguard_plain_tests --gtest_filter='Markdown*'
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "reports/markdown_writer.h"
#include "tests/golden_file.h"
#include "tests/report_fixture.h"

namespace oomguard {
namespace {

TEST(Markdown, SampleMatchesGoldenFile) {
  const std::string md = RenderMarkdown(testing::SampleReport());
  testing::ExpectMatchesGolden("sample.md", md);
}

TEST(Markdown, VerdictIsTheFirstLine) {
  const std::string md = RenderMarkdown(testing::SampleReport());
  EXPECT_EQ(md.substr(0, md.find('\n')), "**oomguard: FAIL** — 2 of 4 scenarios failing, 1 memory regression");
  RunResults passing = testing::SampleReport();
  passing.scenarios.resize(1);
  const std::string pass = RenderMarkdown(passing);
  EXPECT_EQ(pass.substr(0, pass.find('\n')), "**oomguard: PASS** — 1 scenario, none failing, no memory regressions");
}

TEST(Markdown, RegressionRowComesFirstThenFailuresThenReportOrder) {
  std::istringstream md(RenderMarkdown(testing::SampleReport()));
  std::string line;
  while (std::getline(md, line) && line.rfind("|---|", 0) != 0) {
  }
  std::vector<std::string> rows;
  while (std::getline(md, line) && line.rfind("| ", 0) == 0) rows.push_back(line);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(
      rows[0],
      "| bad&amp;name&lt;\"x\"&gt; | a&lt;b&gt;&amp;c | cpu | NVIDIA T4 16GB | **FAIL** (regressed) | 18.00 MiB | — | "
      "16.20 MiB | +1.80 MiB | +11.1% | backward |");
  EXPECT_EQ(rows[1], "| broken | — | cpu | — | **UNRESOLVED** | — | — | — | — | — | — |");
  EXPECT_EQ(rows[2].rfind("| forgotten-no-grad | pitfall |", 0), 0u) << rows[2];
  EXPECT_EQ(
      rows[3],
      "| forgotten-no-grad | fixed | cpu | NVIDIA T4 16GB | PASS (improved) | 9.00 MiB | — | 10.00 MiB | -1024.00 KiB | "
      "-10.0% | backward |");
  EXPECT_EQ(rows[4].rfind("| bad&amp;name&lt;\"x\"&gt; | new\\_variant |", 0), 0u) << rows[4];
  EXPECT_EQ(rows[5], "| gpu-only | — | cpu | — | UNSUPPORTED | — | — | — | — | — | — |");
}

TEST(Markdown, SuggestsUpdatingBaselinesAndNotesStrict) {
  const std::string md = RenderMarkdown(testing::SampleReport());
  EXPECT_NE(md.find("\n1 variant improved beyond tolerance: forgotten-no-grad / fixed (peak\\_bytes -1024.00 KiB, "
                    "-10.0%). Run `oomguard run --update-baselines` to record the new figures.\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("\n1 variant without a stored baseline: bad&amp;name&lt;\"x\"&gt; / new\\_variant. They pass for "
                    "now; `--strict` makes them fail, and `oomguard run --update-baselines` records one.\n"),
            std::string::npos);
  EXPECT_NE(md.find("\n### Failures\n\n- **bad&amp;name&lt;\"x\"&gt; / a&lt;b&gt;&amp;c**: FAIL\n"
                    "  - regression: peak\\_bytes 18.00 MiB vs baseline 16.20 MiB (+1.80 MiB, +11.11%)\n"
                    "  - check failed: peak &lt;= 16MiB: 18.00 MiB &lt;= 16MiB\n"
                    "- **bad&amp;name&lt;\"x\"&gt;**, checks between variants: FAIL\n"
                    "  - a.peak &gt; 2 \\* new\\_variant.peak: 18.00 MiB &gt; 2 \\* 9.00 MiB (18.00 MiB)\n"
                    "- **broken**: UNRESOLVED\n"),
            std::string::npos);
}

TEST(Markdown, CellsCannotBreakTheTableOrRenderAsMarkup) {
  const std::string md = RenderMarkdown(testing::HostileReport());
  EXPECT_NE(md.find("| ctl   name\xff | x\\|y\\`z\\*\\_ &lt;b&gt;&amp;\\$\xc3\xa9 | cpu |"), std::string::npos) << md;
  EXPECT_NE(md.find("  - line1 line2 tab \\|pipe\n  - second\n"), std::string::npos);
  for (const char* raw : {"<b>", "a<b>&c", "x|y"}) EXPECT_EQ(md.find(raw), std::string::npos) << raw;
}

}  // namespace
}  // namespace oomguard
