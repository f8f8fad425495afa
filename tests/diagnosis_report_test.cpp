// How every report carries a diagnosis (model/diagnosis.h), from the sample report's three: a pitfall
// with a measured fix and a timeline event, a pitfall with neither, and advice whose words need escaping
// and whose second measured fix ran out of memory (tests/report_fixture.h). The golden files hold the
// whole reports; these tests pin what a reader relies on, format by format.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "model/measurement_json.h"
#include "reports/console_writer.h"
#include "model/diagnosis_text.h"
#include "reports/html/html_writer.h"
#include "reports/junit_writer.h"
#include "reports/markdown_writer.h"
#include "reports/results_json.h"
#include "tests/report_fixture.h"

namespace oomguard {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

const Diagnosis& Advice(const RunResults& report) { return report.scenarios[1].variants[0].measurement->diagnoses[0]; }

TEST(DiagnosisText, AmountSaysWhenTheBytesCount) {
  Diagnosis d;
  d.bytes = 2097152;
  d.per = DiagnosisPer::kPeak;
  EXPECT_EQ(DiagnosisAmount(d), "2.00 MiB at the peak");
  d.per = DiagnosisPer::kIteration;
  EXPECT_EQ(DiagnosisAmount(d), "2.00 MiB per iteration");
  d.per = DiagnosisPer::kStep;
  EXPECT_EQ(DiagnosisAmount(d), "2.00 MiB per step");
  d.per = DiagnosisPer::kPhaseEnd;
  EXPECT_EQ(DiagnosisAmount(d), "2.00 MiB when its phase ends");
  d.phase = "eval";
  EXPECT_EQ(DiagnosisAmount(d), "2.00 MiB at the end of eval");
  d.per = DiagnosisPer::kOnce;
  EXPECT_EQ(DiagnosisAmount(d), "2.00 MiB");
  d.bytes = 0;
  EXPECT_EQ(DiagnosisAmount(d), "no bytes");
}

TEST(DiagnosisText, AMeasuredFixThatFailedSaysSoBeforeItsNumbers) {
  const RunResults report = testing::SampleReport();
  const Diagnosis& d = Advice(report);
  EXPECT_EQ(MeasuredFixText(d.measured[0], 18 * 1048576),
            "autocast: bf16: peak 12.00 MiB (-6.00 MiB), live after 2.00 MiB, growth +4.00 KiB/iteration");
  EXPECT_EQ(MeasuredFixText(d.measured[1], 18 * 1048576),
            "batch: 32, accumulate: 2: oom, peak 20.00 MiB (+2.00 MiB), live after 0 bytes");
}

// A fix that could not run (bf16 autocast of an LSTM on an AVX2 cpu: oneDNN has no such primitive)
// measured nothing: the text gives its error, not how far it got as if that were a saving, and the
// JSON's flattened best fix is the first that passed, never it.
TEST(DiagnosisText, AFixThatFailedWithAnErrorGivesTheErrorAndNoNumbers) {
  const MeasuredFix error{"loop.autocast: \"bfloat16\"",
                          "error:error",
                          7 * 1048576,
                          5 * 1048576,
                          std::nullopt,
                          "could not create a primitive descriptor for the LSTM forward propagation primitive"};
  EXPECT_EQ(MeasuredFixText(error, 60 * 1048576),
            "loop.autocast: \"bfloat16\": error:error: could not create a primitive descriptor for the LSTM forward "
            "propagation primitive");
  VariantMeasurement m = testing::SampleMeasurement("x", 1);
  Diagnosis d;
  d.kind = DiagnosisKind::kActivationsDominate;
  d.measured = {error};
  m.diagnoses = {d};
  m.diagnosed = true;
  nlohmann::json j = MeasurementToJson(m).at("diagnoses").at(0);
  EXPECT_TRUE(j.at("fix_peak_bytes").is_null());
  EXPECT_EQ(j.at("fixes_measured").at(0).at("error"), error.error);
  m.diagnoses[0].measured.push_back({"data.batch: 8", "pass", 40 * 1048576, 12 * 1048576, 0.0, ""});
  j = MeasurementToJson(m).at("diagnoses").at(0);
  EXPECT_EQ(j.at("fix_peak_bytes"), 40 * 1048576);
  EXPECT_EQ(j.at("fixes_measured").at(1).at("error"), "");
  VariantMeasurement read;
  std::string why;
  ASSERT_TRUE(MeasurementFromJson(MeasurementToJson(m), &read, &why)) << why;
  EXPECT_EQ(read.diagnoses.at(0).measured.at(0).error, error.error);
}

TEST(DiagnosisReport, ConsoleListsEachUnderItsVariantWithEveryMeasuredFix) {
  const RunResults report = testing::SampleReport();
  std::ostringstream out;
  WriteScenarioBlock(report.scenarios[0], out);
  const std::string text = out.str();
  const size_t pitfall = text.find("            pitfall  ");
  const size_t kept = text.find("              diagnosis eval-keeps-graph (18.00 MiB at the end of eval): 64 tensors");
  const size_t fixed = text.find("            fixed    ");
  ASSERT_NE(kept, std::string::npos) << text;
  EXPECT_LT(pitfall, kept);
  EXPECT_LT(kept, fixed);
  EXPECT_NE(text.find("                measured: loop.eval.no_grad: true: peak 9.00 MiB (-18.00 MiB), live after "
                      "1024.00 KiB\n"),
            std::string::npos);
  EXPECT_EQ(Count(text, "diagnosis "), 2u);
  EXPECT_EQ(Count(text, "measured: "), 1u);  // retained-grad has no knob to measure
}

TEST(DiagnosisReport, JsonRoundTripsEveryField) {
  const RunResults report = testing::SampleReport();
  const VariantMeasurement& original = *report.scenarios[1].variants[0].measurement;
  VariantMeasurement back;
  std::string error;
  ASSERT_TRUE(MeasurementFromJson(MeasurementToJson(original), &back, &error)) << error;
  ASSERT_TRUE(back.diagnosed);
  ASSERT_EQ(back.diagnoses.size(), 1u);
  const Diagnosis& d = back.diagnoses[0];
  const Diagnosis& o = original.diagnoses[0];
  EXPECT_EQ(d.kind, o.kind);
  EXPECT_EQ(d.bytes, o.bytes);
  EXPECT_EQ(d.per, o.per);
  EXPECT_EQ(d.phase, o.phase);
  EXPECT_EQ(d.where, o.where);
  EXPECT_EQ(d.message, o.message);
  EXPECT_EQ(d.fix, o.fix);
  EXPECT_EQ(d.event_index, 20);
  ASSERT_EQ(d.measured.size(), 2u);
  EXPECT_EQ(d.measured[1].outcome, "oom");
  EXPECT_FALSE(d.measured[1].live_growth_per_iteration.has_value());
  EXPECT_EQ(d.measured[0].live_growth_per_iteration, 4096.0);
}

TEST(DiagnosisReport, JsonSaysWatchedAndFoundNothingApartFromNotWatched) {
  const nlohmann::json j = ResultsToJson(testing::SampleReport());
  const nlohmann::json& pass = j.at("scenarios").at(0).at("variants");
  EXPECT_EQ(pass.at(1).at("measurement").at("diagnoses"), nlohmann::json::array());  // fixed: watched
  const nlohmann::json& kept = pass.at(0).at("measurement").at("diagnoses").at(0);
  EXPECT_EQ(kept.at("kind"), "eval-keeps-graph");
  EXPECT_EQ(kept.at("severity"), "pitfall");
  EXPECT_EQ(kept.at("fix_peak_bytes"), 9437184);  // the best measured fix, flattened for jq
  EXPECT_EQ(kept.at("fix_live_after_bytes"), 1048576);
  EXPECT_TRUE(pass.at(0).at("measurement").at("diagnoses").at(1).at("fix_peak_bytes").is_null());
  VariantMeasurement unwatched = testing::SampleMeasurement("x", 1);
  EXPECT_FALSE(MeasurementToJson(unwatched).contains("diagnoses"));
}

TEST(DiagnosisReport, MarkdownPutsPitfallsBeforeAdviceAndEscapesTheirWords) {
  const std::string md = RenderMarkdown(testing::SampleReport());
  const size_t section =
      md.find("\n### Diagnoses\n\n| variant | backend | diagnosis | bytes | found | fix | fix measured |\n");
  ASSERT_NE(section, std::string::npos) << md;
  const size_t kept = md.find("| forgotten-no-grad / pitfall | cpu | diagnosis eval-keeps-graph |", section);
  const size_t retained = md.find("| forgotten-no-grad / pitfall | cpu | diagnosis retained-grad |", section);
  const size_t advice = md.find("| bad&amp;name&lt;\"x\"&gt; / a&lt;b&gt;&amp;c | cpu | advice activations-dominate |");
  EXPECT_LT(section, kept);
  EXPECT_LT(kept, retained);
  EXPECT_LT(retained, advice);
  // The cell's pipe is escaped, its markup is text, and the best measured fix (not the oom) is shown.
  EXPECT_NE(md.find("| activations are 72% of the peak: &lt;b&gt;13.00 MiB&lt;/b&gt; \\| \"saved\" &amp; kept | "
                    "checkpoint segments, bf16 autocast or a smaller batch | autocast: bf16: peak 12.00 MiB "
                    "(-6.00 MiB), live after 2.00 MiB, growth +4.00 KiB/iteration |\n"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("accumulate: 2: oom"), std::string::npos);
  RunResults none = testing::SampleReport();
  for (ScenarioResult& s : none.scenarios)
    for (VariantResult& v : s.variants)
      if (v.measurement) v.measurement->diagnoses.clear();
  EXPECT_EQ(RenderMarkdown(none).find("### Diagnoses"), std::string::npos);
}

TEST(DiagnosisReport, JUnitPutsThemInSystemOutAndInAFailuresBody) {
  const std::string xml = RenderJUnit(testing::SampleReport());
  // Once in the passing pitfall's system-out; twice for the failing variant (failure body, system-out).
  EXPECT_EQ(Count(xml, "diagnosis eval-keeps-graph (18.00 MiB at the end of eval)"), 1u);
  EXPECT_EQ(Count(xml,
                  "advice activations-dominate (13.00 MiB at the peak): activations are 72% of the peak: "
                  "&lt;b&gt;13.00 MiB&lt;/b&gt; | &quot;saved&quot; &amp; kept\n"),
            2u);
  const size_t failure = xml.find("<failure ");
  const size_t failure_end = xml.find("</failure>", failure);
  EXPECT_NE(
      xml.substr(failure, failure_end - failure).find("  measured: batch: 32, accumulate: 2: oom, peak 20.00 MiB"),
      std::string::npos);
  EXPECT_EQ(xml.find("<b>"), std::string::npos);
}

TEST(DiagnosisReport, HtmlMarksEachDiagnosisWithAnEventOnItsTimeline) {
  const std::string html = RenderHtml(testing::SampleReport());
  // Two of the three have an event (retained-grad has -1): two triangles, each with its message as title.
  EXPECT_EQ(Count(html, "<path class=\"diagnosis\""), 2u);
  EXPECT_NE(html.find("<title>eval-keeps-graph: 64 tensors with a grad function made in eval are alive at its end "
                      "(18.00 MiB)</title>"),
            std::string::npos);
  EXPECT_NE(html.find("<title>activations-dominate: activations are 72% of the peak: &lt;b&gt;13.00 "
                      "MiB&lt;/b&gt; | &quot;saved&quot; &amp; kept</title>"),
            std::string::npos);
  EXPECT_EQ(Count(html, "<ul class=\"diagnoses\">"), 2u);
  EXPECT_NE(html.find("<li><b>diagnosis retained-grad</b> (2.00 MiB): 4 non-leaf tensors"), std::string::npos);
  EXPECT_EQ(html.find("<b>13.00"), std::string::npos);
}

}  // namespace
}  // namespace oomguard
