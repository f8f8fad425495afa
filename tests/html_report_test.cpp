// The HTML report (reports/html/html_writer.h) and its timeline chart (reports/html/svg_timeline.h).
//
// Golden file: tests/golden/sample.html is RenderHtml(oomguard::testing::SampleReport()), compared
// byte for byte. After an intended change to the page, regenerate it and review the diff:
//
//   OOMGUARD_UPDATE_GOLDEN=1 build/tests/oomguard_tests --gtest_filter='HtmlReportTest.MatchesGolden'
//   git diff tests/golden/sample.html
//   ci/render_report.sh tests/golden/sample.html /tmp/sample.png   # and look at the picture
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "reports/html/html_writer.h"
#include "reports/html/svg_timeline.h"
#include "tests/golden_file.h"
#include "tests/report_fixture.h"

namespace oomguard {
namespace {

constexpr int64_t kMiB = 1048576;

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

TEST(HtmlReportTest, MatchesGolden) {
  testing::ExpectMatchesGolden("sample.html", RenderHtml(testing::SampleReport()));
}

TEST(HtmlReportTest, EscapesEveryName) {
  const std::string page = RenderHtml(testing::SampleReport());
  EXPECT_NE(page.find("bad&amp;name&lt;&quot;x&quot;&gt;"), std::string::npos);
  EXPECT_NE(page.find("a&lt;b&gt;&amp;c"), std::string::npos);
  EXPECT_NE(page.find("Escaping: &lt;b&gt;not bold&lt;/b&gt; &amp; &quot;quoted&quot;"), std::string::npos);
  EXPECT_NE(page.find("scenarios/baselines/bad&amp;name.json"), std::string::npos);
  EXPECT_EQ(page.find("bad&name"), std::string::npos);
  EXPECT_EQ(page.find("name<"), std::string::npos);
  EXPECT_EQ(page.find("a<b>"), std::string::npos);
  EXPECT_EQ(page.find("<b>not bold"), std::string::npos);
  EXPECT_EQ(page.find("\"quoted\""), std::string::npos);
}

TEST(HtmlReportTest, IsSelfContainedAndStatic) {
  const std::string page = RenderHtml(testing::SampleReport());
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>\n", 0), 0u);
  EXPECT_EQ(Count(page, "<style>"), 1u);
  EXPECT_EQ(RenderHtml(testing::SampleReport()), page);  // deterministic
}

TEST(HtmlReportTest, HeaderHasVerdictAndTotals) {
  const std::string page = RenderHtml(testing::SampleReport());
  EXPECT_NE(page.find("<h1>oomguard <span class=\"badge r-fail\">FAIL</span></h1>"), std::string::npos);
  EXPECT_NE(page.find("4 scenarios on cpu in 4.2 s: 1 PASS, 1 FAIL, 1 UNSUPPORTED, 1 UNRESOLVED (2 failing)"),
            std::string::npos);
  EXPECT_NE(page.find("<title>oomguard: FAIL, 4 scenarios on cpu</title>"), std::string::npos);
}

TEST(HtmlReportTest, OneChartPerMeasuredScenarioWithPeaksAndCap) {
  const RunResults report = testing::SampleReport();
  const std::string page = RenderHtml(report);
  size_t measured = 0;
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) {
      if (v.measurement) {
        ++measured;
        break;
      }
    }
  }
  EXPECT_EQ(measured, 2u);
  EXPECT_EQ(Count(page, "<svg"), measured);
  EXPECT_EQ(Count(page, "</svg>"), measured);
  // Peak labels: pitfall 27 MiB and fixed 9 MiB in the first chart, a<b>&c 18 MiB and new_variant 9 MiB.
  EXPECT_EQ(Count(page, ">peak 27.00 MiB</text>"), 1u);
  EXPECT_EQ(Count(page, ">peak 18.00 MiB</text>"), 1u);
  EXPECT_EQ(Count(page, ">peak 9.00 MiB</text>"), 2u);
  EXPECT_EQ(Count(page, "<circle "), 4u);
  // The sample's T4 cap (14.33 GiB) is ~490x its data: named in each legend, not drawn as a line.
  EXPECT_EQ(Count(page, ">cap 14.33 GiB</text>"), 2u);
  EXPECT_EQ(Count(page, ">far above: not drawn</text>"), 2u);
  EXPECT_EQ(Count(page, "class=\"cap\""), 0u);
}

TEST(HtmlReportTest, TablesAndChecks) {
  const std::string page = RenderHtml(testing::SampleReport());
  EXPECT_NE(page.find("<td class=\"num\">18.00 MiB</td><td>backward</td><td><span class=\"v-regressed\">regressed"
                      "</span><br>peak_bytes 16.20 MiB &rarr; 18.00 MiB (+1.80 MiB, +11.1%)"),
            std::string::npos);
  EXPECT_NE(page.find("<span class=\"v-improved\">improved</span><br>peak_bytes 10.00 MiB &rarr; 9.00 MiB "
                      "(-1024.00 KiB, -10.0%)"),
            std::string::npos);
  EXPECT_NE(page.find("<span class=\"v-new\">new</span>: nothing stored in scenarios/baselines/bad&amp;name.json"),
            std::string::npos);
  EXPECT_NE(page.find("<li>check failed: peak &lt;= 16MiB: 18.00 MiB &lt;= 16MiB</li>"), std::string::npos);
  EXPECT_NE(page.find("<li class=\"failed\"><span class=\"status\">FAILED</span>a.peak &gt; 2 * new_variant.peak: "
                      "18.00 MiB &gt; 2 * 9.00 MiB (18.00 MiB)</li>"),
            std::string::npos);
  EXPECT_NE(page.find("<li class=\"ok\"><span class=\"status\">ok</span>pitfall.phase_peak.eval"), std::string::npos);
  EXPECT_NE(page.find("<pre class=\"error\">scenarios/broken.json:3:14: JSON syntax error: unexpected &#39;o&#39;"),
            std::string::npos);
}

TEST(HtmlReportTest, ACudaRunAddsTheAllocatorsPeaksAndRetries) {
  RunResults report = testing::SampleReport();
  EXPECT_EQ(RenderHtml(report).find("<th>cuda allocated</th>"), std::string::npos);  // cpu: no such columns
  report.scenarios.front().variants.front().measurement->cuda =
      CudaMeasurement{20 * kMiB, 22 * kMiB, 20 * kMiB, 19 * kMiB, 2, 0, {}};
  const std::string page = RenderHtml(report);
  EXPECT_EQ(Count(page, "<th>cuda allocated</th><th>cuda reserved</th><th>retries</th>"), 1u);
  EXPECT_NE(page.find("<td class=\"num\">20.00 MiB</td><td class=\"num\">22.00 MiB</td><td class=\"num\">2</td>"),
            std::string::npos);
  // A variant of the same scenario without cuda statistics keeps the columns aligned.
  EXPECT_NE(page.find("<td class=\"num\">&mdash;</td><td class=\"num\">&mdash;</td><td class=\"num\">&mdash;</td>"),
            std::string::npos);
}

TEST(HtmlReportTest, AModelCudaRunShowsThePredictedPeaksMarkedAsTheModels) {
  RunResults report = testing::SampleReport();
  report.scenarios.front().variants.front().measurement->cuda_model =
      CudaModelMeasurement{20 * kMiB, 22 * kMiB, 19 * kMiB, 3, 1, 0};
  const std::string page = RenderHtml(report);
  EXPECT_EQ(Count(page, "<th>cuda allocated (model)</th><th>cuda reserved (model)</th><th>retries (model)</th>"), 1u);
  EXPECT_NE(page.find("<td class=\"num\">20.00 MiB</td><td class=\"num\">22.00 MiB</td><td class=\"num\">1</td>"),
            std::string::npos);
}

TEST(HtmlReportTest, ASnapshotIsLinkedFromItsVariant) {
  RunResults report = testing::SampleReport();
  report.scenarios.front().variants.front().measurement->snapshot = "snaps/x&y.pickle";
  EXPECT_NE(RenderHtml(report).find(
                "<br>memory_viz snapshot: <a href=\"snaps/x&amp;y.pickle\">snaps/x&amp;y.pickle</a></td>"),
            std::string::npos);
  EXPECT_EQ(RenderHtml(testing::SampleReport()).find("memory_viz snapshot"), std::string::npos);
}

TEST(HtmlReportTest, OomVariantShowsWhatWasLive) {
  RunResults report = testing::SampleReport();
  VariantResult& v = report.scenarios[1].variants[0];
  v.measurement->outcome = VariantOutcome::Oom();
  OomDetail oom;
  oom.phase = "backward";
  oom.requested_bytes = 4 * kMiB;
  oom.cap_bytes = 20 * kMiB;
  oom.live_bytes = 18 * kMiB;
  oom.message = "tried to allocate <4 MiB>";
  oom.live = {2 * kMiB, 1 * kMiB, 0, 1 * kMiB, 14 * kMiB, {{"linear<1>", 6 * kMiB}}};
  v.measurement->oom = oom;
  const std::string page = RenderHtml(report);
  EXPECT_NE(page.find("<h3>Out of memory: a&lt;b&gt;&amp;c</h3>\n<p>In <b>backward</b>: asked for 4.00 MiB with "
                      "18.00 MiB live under a cap of 20.00 MiB.</p>"),
            std::string::npos);
  EXPECT_NE(page.find("<tr><td>activations and transient</td><td class=\"num\">14.00 MiB</td>"), std::string::npos);
  EXPECT_NE(page.find("77.8%</td>"), std::string::npos);
  EXPECT_NE(page.find("<tr><td>linear&lt;1&gt;</td><td class=\"num\">6.00 MiB</td></tr>"), std::string::npos);
  EXPECT_NE(page.find("<pre class=\"message\">tried to allocate &lt;4 MiB&gt;</pre>"), std::string::npos);
  EXPECT_NE(page.find(">OOM asking 4.00 MiB</text>"), std::string::npos);
}

// A scenario with one variant per timeline, each a list of (event, live bytes) points.
ScenarioResult Timelines(const std::vector<std::vector<TimelinePoint>>& timelines, int64_t cap_bytes) {
  ScenarioResult s;
  s.name = "chart<&>";
  s.cap_bytes = cap_bytes;
  for (size_t i = 0; i < timelines.size(); ++i) {
    VariantResult v;
    v.name = "v" + std::to_string(i);
    v.measurement.emplace();
    v.measurement->ledger.timeline = timelines[i];
    for (const TimelinePoint& p : timelines[i]) {
      v.measurement->ledger.peak_bytes = std::max(v.measurement->ledger.peak_bytes, p.live_bytes);
    }
    v.measurement->ledger.phase_marks = {{0, "forward"}, {60, "backward"}};
    s.variants.push_back(v);
  }
  return s;
}

TEST(SvgTimelineTest, MapsEventsAndBytesToPixels) {
  // 600x300: the plot spans x 84..374 (210 px of legend on the right) and y 30..240 (axis and phase key below).
  const ScenarioResult s = Timelines({{{0, 0}, {100, 4 * kMiB}}}, 0);
  const TimelineFrame f = ComputeTimelineFrame(s, 600, 300);
  EXPECT_EQ(f.max_event, 100);
  EXPECT_EQ(f.data_max_bytes, 4 * kMiB);
  EXPECT_EQ(f.y_step_bytes, 1 * kMiB);
  EXPECT_EQ(f.y_max_bytes, 4 * kMiB);
  EXPECT_DOUBLE_EQ(f.X(0), 84.0);
  EXPECT_DOUBLE_EQ(f.X(50), 229.0);
  EXPECT_DOUBLE_EQ(f.X(100), 374.0);
  EXPECT_DOUBLE_EQ(f.Y(0), 240.0);
  EXPECT_DOUBLE_EQ(f.Y(2 * kMiB), 135.0);
  EXPECT_DOUBLE_EQ(f.Y(4 * kMiB), 30.0);
  const std::string svg = RenderTimelineSvg(s, 600, 300);
  EXPECT_NE(svg.find("points=\"84.0,240.0 374.0,30.0\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("<circle cx=\"374.0\" cy=\"30.0\""), std::string::npos);
  EXPECT_NE(svg.find(">4.00 MiB</text>"), std::string::npos);  // the top gridline's label
  EXPECT_NE(svg.find("<title>Live memory of chart&lt;&amp;&gt; over allocation events</title>"), std::string::npos);
}

TEST(SvgTimelineTest, VariantsWithDifferentEventCountsShareTheAxis) {
  const ScenarioResult s = Timelines({{{0, 0}, {100, 4 * kMiB}}, {{0, 0}, {50, 2 * kMiB}}}, 0);
  const std::string svg = RenderTimelineSvg(s, 600, 300);
  EXPECT_NE(svg.find("points=\"84.0,240.0 229.0,135.0\""), std::string::npos);
  EXPECT_NE(svg.find(">peak 2.00 MiB</text>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<polyline "), 2u);
}

TEST(SvgTimelineTest, CapNearTheDataIsALine) {
  const ScenarioResult s = Timelines({{{0, 0}, {100, 4 * kMiB}}}, 5 * kMiB);
  const TimelineFrame f = ComputeTimelineFrame(s, 600, 300);
  EXPECT_TRUE(f.cap_drawn);
  EXPECT_EQ(f.y_max_bytes, 6 * kMiB);  // stretched to hold the cap: gridlines every 2 MiB
  const std::string svg = RenderTimelineSvg(s, 600, 300);
  EXPECT_NE(svg.find("<line x1=\"84.0\" y1=\"65.0\" x2=\"374.0\" y2=\"65.0\" class=\"cap\""), std::string::npos);
  EXPECT_EQ(Count(svg, ">cap 5.00 MiB</text>"), 2u);  // on the line and in the legend
  EXPECT_EQ(svg.find("far above"), std::string::npos);
}

TEST(SvgTimelineTest, CapFarAboveTheDataIsOnlyNamed) {
  const ScenarioResult s = Timelines({{{0, 0}, {100, 4 * kMiB}}}, 1024 * kMiB);
  const TimelineFrame f = ComputeTimelineFrame(s, 600, 300);
  EXPECT_FALSE(f.cap_drawn);
  EXPECT_EQ(f.y_max_bytes, 4 * kMiB);
  const std::string svg = RenderTimelineSvg(s, 600, 300);
  EXPECT_EQ(svg.find("class=\"cap\""), std::string::npos);
  EXPECT_NE(svg.find(">(256x the chart&#39;s top)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">far above: not drawn</text>"), std::string::npos);
}

TEST(SvgTimelineTest, PhaseBandsAndOwnTicks) {
  ScenarioResult s = Timelines({{{0, 0}, {100, 4 * kMiB}}, {{0, 0}, {100, 2 * kMiB}}}, 0);
  std::string svg = RenderTimelineSvg(s, 600, 300);
  EXPECT_NE(svg.find("<rect x=\"84.0\" y=\"30.0\" width=\"174.0\" height=\"210.0\" fill=\"#dceafa\"><title>forward"),
            std::string::npos);
  EXPECT_NE(svg.find("<rect x=\"258.0\" y=\"30.0\" width=\"116.0\""), std::string::npos);
  EXPECT_NE(svg.find(">backward</text>"), std::string::npos);
  EXPECT_EQ(svg.find("ticks at the bottom"), std::string::npos);  // same marks: the bands serve both
  s.variants[1].measurement->ledger.phase_marks = {{0, "forward"}, {40, "backward"}};
  svg = RenderTimelineSvg(s, 600, 300);
  EXPECT_NE(svg.find("<title>v1: backward</title>"), std::string::npos);
  EXPECT_NE(svg.find("ticks at the bottom"), std::string::npos);
  // A variant that stopped early (at an OOM, say) with the same phases so far needs no ticks; the
  // bands come from the variant that ran longest.
  s.variants[0].measurement->ledger.timeline = {{0, 0}, {30, 4 * kMiB}};
  s.variants[0].measurement->ledger.phase_marks = {{0, "forward"}};
  svg = RenderTimelineSvg(s, 600, 300);
  EXPECT_EQ(svg.find("ticks at the bottom"), std::string::npos);
  EXPECT_NE(svg.find("<rect x=\"200.0\" y=\"30.0\" width=\"174.0\""), std::string::npos);  // backward 40..100
  // The key of band colours under the axis, each phase once.
  EXPECT_EQ(Count(svg, ">phases:</text>"), 1u);
  EXPECT_EQ(Count(svg, "width=\"10.0\" height=\"10.0\" fill=\"#fde5d2\""), 1u);
}

TEST(SvgTimelineTest, NothingToDrawIsEmpty) {
  ScenarioResult s = Timelines({}, 0);
  EXPECT_EQ(RenderTimelineSvg(s, 600, 300), "");
  VariantResult crashed;
  crashed.name = "crashed";
  s.variants.push_back(crashed);
  EXPECT_EQ(RenderTimelineSvg(s, 600, 300), "");
}

}  // namespace
}  // namespace oomguard
