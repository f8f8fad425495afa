#include "reports/html/html_writer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>

#include "base/byte_size.h"
#include "model/diagnosis_text.h"
#include "reports/escape.h"
#include "reports/html/svg_timeline.h"
#include "reports/rank_text.h"
#include "reports/report_format.h"

namespace oomguard {
namespace {

constexpr std::string_view kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;margin:0;background:#f6f7f9}
main{max-width:1240px;margin:0 auto;padding:16px 24px 48px}
header.run{padding:16px 20px;border-radius:6px;background:#fff;border-left:8px solid #888;margin-bottom:16px}
header.run.failing{border-left-color:#c62828}header.run.passing{border-left-color:#2e7d32}
h1{font-size:22px;margin:0 0 6px}h2{font-size:18px;margin:0 0 6px}h3{font-size:15px;margin:16px 0 6px}
.meta{color:#555;margin:2px 0}.summary{margin:4px 0 8px}
.badge{display:inline-block;min-width:56px;text-align:center;padding:1px 8px;border-radius:4px;font-size:12px;
font-weight:700;color:#fff;background:#777;vertical-align:middle;margin-right:6px}
.r-pass{background:#2e7d32}.r-fail,.r-xpass,.r-timeout,.r-unresolved{background:#c62828}
.r-xfail{background:#8d6e00}.r-unsupported,.r-skipped{background:#78909c}
section.scenario{background:#fff;border-radius:6px;padding:16px 20px;margin:16px 0}
table{border-collapse:collapse;margin:6px 0}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600;white-space:nowrap}table.variants td:first-child{white-space:nowrap}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
table.index td{border:none;padding:2px 8px}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px;vertical-align:-1px}
ul{margin:4px 0;padding-left:20px}ul.checks{list-style:none;padding-left:0}ul.checks li{margin:3px 0}
.status{display:inline-block;width:64px;font-weight:700}.ok .status{color:#2e7d32}.failed .status{color:#c62828}
.skip .status{color:#78909c}
.v-regressed,.v-new{color:#c62828;font-weight:600}.v-improved{color:#2e7d32;font-weight:600}
pre{background:#f6f7f9;padding:8px;white-space:pre-wrap;word-break:break-word;margin:6px 0}
.error{color:#b71c1c}.bar{display:inline-block;height:10px;background:#ef9a9a;vertical-align:middle}
svg.timeline{max-width:100%;height:auto;display:block;margin:8px 0}
.oom{border-top:1px solid #eee;margin-top:12px}
)";

std::string Scenarios(size_t n) { return std::to_string(n) + (n == 1 ? " scenario" : " scenarios"); }

std::string Badge(ResultCode code) {
  std::string name(ResultName(code)), css = name;
  for (char& c : css) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return "<span class=\"badge r-" + css + "\">" + name + "</span>";
}

std::string MetricValue(const std::string& metric, int64_t value) {
  return metric == "alloc_count" ? std::to_string(value) : FormatBytes(value);  // as baseline_diff.cpp
}

std::string BaselineCell(const BaselineComparison& b) {
  std::string verdict(BaselineVerdictName(b.verdict));
  std::string out = "<span class=\"v-" + (b.verdict == BaselineVerdict::kNotCompared ? "none" : verdict) + "\">" +
                    verdict + "</span>";
  if (b.verdict == BaselineVerdict::kNew && !b.baseline_file.empty()) {
    out += ": nothing stored in " + HtmlEscape(b.baseline_file);
  }
  // The peak (first) and every metric that moved; the unchanged rest as a count.
  size_t unchanged = 0;
  for (size_t i = 0; i < b.metrics.size(); ++i) {
    const MetricDiff& d = b.metrics[i];
    if (i > 0 && d.verdict == BaselineVerdict::kUnchanged) {
      ++unchanged;
      continue;
    }
    const bool count = d.metric == "alloc_count";
    char percent[32];
    std::snprintf(percent, sizeof percent, "%+.1f%%", d.delta_percent);
    out += "<br>" + HtmlEscape(d.metric) + " " + HtmlEscape(MetricValue(d.metric, d.baseline)) + " &rarr; " +
           HtmlEscape(MetricValue(d.metric, d.current)) + " (" +
           HtmlEscape(count ? (d.delta > 0 ? "+" : "") + std::to_string(d.delta) : FormatSignedBytes(d.delta)) + ", " +
           percent + ")";
  }
  if (unchanged > 0) out += "<br>" + std::to_string(unchanged) + " more unchanged";
  return out;
}

std::string ReasonsCell(const VariantResult& v) {
  std::string items;
  if (!v.xfail_reason.empty()) items += "<li>xfail: " + HtmlEscape(v.xfail_reason) + "</li>";
  for (const std::string& reason : v.reasons) items += "<li>" + HtmlEscape(reason) + "</li>";
  std::string out = items.empty() ? "" : "<ul>" + items + "</ul>";
  if (!v.diagnostics.empty()) out += "<pre>" + HtmlEscape(v.diagnostics) + "</pre>";
  if (v.measurement && v.measurement->parallel) {  // which rank, its strategy and precision
    out += "<p class=\"parallel\">" + HtmlEscape(ParallelText(*v.measurement->parallel)) + "</p>";
  }
  if (v.measurement && !v.measurement->ranks.empty()) {  // real ranks (cpu): each one's peak
    out += "<p class=\"ranks\">real ranks: " + HtmlEscape(RankPeaksText(*v.measurement)) + "</p>";
  }
  if (v.measurement && !v.measurement->diagnoses.empty()) {
    out += "<ul class=\"diagnoses\">";
    for (const Diagnosis& d : v.measurement->diagnoses) {
      out += "<li><b>" + HtmlEscape(DiagnosisLabel(d)) + "</b> (" + HtmlEscape(DiagnosisAmount(d)) +
             "): " + HtmlEscape(d.message) + "<br>fix: " + HtmlEscape(d.fix);
      for (const MeasuredFix& f : d.measured) {
        out += "<br>measured: " + HtmlEscape(MeasuredFixText(f, v.measurement->ledger.peak_bytes));
      }
      out += "</li>";
    }
    out += "</ul>";
  }
  return out;
}

void WriteHeader(const RunResults& report, std::string& h) {
  std::map<ResultCode, int> counts;
  int failing = 0;
  for (const ScenarioResult& s : report.scenarios) {
    ++counts[s.code];
    failing += IsFailure(s.code);
  }
  h += std::string("<header class=\"run ") + (failing ? "failing" : "passing") + "\">\n";
  h += "<h1>oomguard " + Badge(failing ? ResultCode::kFail : ResultCode::kPass) + "</h1>\n";
  h += "<p class=\"totals\">" + Scenarios(report.scenarios.size()) + " on " + HtmlEscape(report.backend) + " in " +
       FormatSeconds(report.duration_ms) + ":";
  const char* separator = " ";
  for (const auto& [code, n] : counts) {
    h += separator + std::to_string(n) + " " + std::string(ResultName(code));
    separator = ", ";
  }
  if (failing) h += " (" + std::to_string(failing) + " failing)";
  h += "</p>\n<p class=\"meta\">oomguard " + HtmlEscape(report.oomguard_version) + " &middot; LibTorch " +
       HtmlEscape(report.libtorch_version) + " &middot; jobs " + std::to_string(report.jobs) + " &middot; iterations " +
       (report.iterations > 0 ? std::to_string(report.iterations) : std::string("as each scenario sets")) +
       " &middot; " + (report.compared_with_baselines ? "compared with baselines" : "no baselines") +
       (report.strict ? " (strict)" : "") + "</p>\n";
  h += "<table class=\"index\">\n";
  for (size_t i = 0; i < report.scenarios.size(); ++i) {
    const ScenarioResult& s = report.scenarios[i];
    h += "<tr><td>" + Badge(s.code) + "</td><td><a href=\"#scenario-" + std::to_string(i + 1) + "\">" +
         HtmlEscape(s.name) + "</a></td><td>" + HtmlEscape(s.error.empty() ? s.summary : s.error) + "</td></tr>\n";
  }
  h += "</table>\n</header>\n";
}

// The caching allocator's numbers for a variant: measured on cuda, or predicted by --model-cuda.
struct AllocatorColumns {
  int64_t allocated = 0, reserved = 0, retries = 0;
};

std::optional<AllocatorColumns> AllocatorColumnsOf(const VariantResult& v) {
  if (!v.measurement) return std::nullopt;
  if (const auto& c = v.measurement->cuda) {
    return AllocatorColumns{c->allocated_peak_bytes, c->reserved_peak_bytes, c->alloc_retries};
  }
  if (const auto& c = v.measurement->cuda_model) {
    return AllocatorColumns{c->allocated_peak_bytes, c->reserved_peak_bytes, c->alloc_retries};
  }
  return std::nullopt;
}

void WriteVariantTable(const ScenarioResult& s, bool baselines, std::string& h) {
  const bool allocator = std::any_of(s.variants.begin(), s.variants.end(),
                                     [](const VariantResult& v) { return AllocatorColumnsOf(v).has_value(); });
  const bool measured = std::any_of(s.variants.begin(), s.variants.end(),
                                    [](const VariantResult& v) { return v.measurement && v.measurement->cuda; });
  h += "<table class=\"variants\">\n<tr><th>variant</th><th>result</th><th>outcome</th><th>peak</th>"
       "<th>peak phase</th>";
  if (allocator && measured) h += "<th>cuda allocated</th><th>cuda reserved</th><th>retries</th>";
  if (allocator && !measured)
    h += "<th>cuda allocated (model)</th><th>cuda reserved (model)</th><th>retries (model)</th>";
  if (baselines) h += "<th>baseline</th>";
  h += "<th>reasons</th></tr>\n";
  for (size_t i = 0; i < s.variants.size(); ++i) {
    const VariantResult& v = s.variants[i];
    h += "<tr><td><span class=\"swatch\" style=\"background:" + std::string(VariantColour(i)) + "\"></span>" +
         HtmlEscape(v.name) + "</td><td>" + Badge(v.code) + "</td><td>";
    if (v.measurement) {
      const VariantMeasurement& m = *v.measurement;
      h += HtmlEscape(Name(m.outcome));
      if (v.expected_outcome.kind != Outcome::kPass) h += " (expected " + HtmlEscape(Name(v.expected_outcome)) + ")";
      if (v.expected_leak) h += " (leak expected)";
      h += "</td><td class=\"num\">" + HtmlEscape(FormatBytes(m.ledger.peak_bytes)) + "</td><td>" +
           HtmlEscape(m.ledger.peak_phase) + "</td>";
    } else {
      h += "not measured</td><td class=\"num\">&mdash;</td><td>&mdash;</td>";
    }
    if (const std::optional<AllocatorColumns> c = AllocatorColumnsOf(v); allocator && c) {
      h += "<td class=\"num\">" + HtmlEscape(FormatBytes(c->allocated)) + "</td><td class=\"num\">" +
           HtmlEscape(FormatBytes(c->reserved)) + "</td><td class=\"num\">" + std::to_string(c->retries) + "</td>";
    } else if (allocator) {
      h += "<td class=\"num\">&mdash;</td><td class=\"num\">&mdash;</td><td class=\"num\">&mdash;</td>";
    }
    if (baselines) h += "<td>" + BaselineCell(v.baseline) + "</td>";
    h += "<td>" + ReasonsCell(v);
    if (v.measurement && !v.measurement->snapshot.empty()) {
      h += "<br>memory_viz snapshot: <a href=\"" + HtmlEscape(v.measurement->snapshot) + "\">" +
           HtmlEscape(v.measurement->snapshot) + "</a>";
    }
    h += "</td></tr>\n";
  }
  h += "</table>\n";
}

void WriteCheck(const CheckResult& c, const std::string& prefix, std::string& h) {
  const char* css = c.holds ? "ok" : c.skipped ? "skip" : "failed";
  const char* status = c.holds ? "ok" : c.skipped ? "skip" : "FAILED";
  h += std::string("<li class=\"") + css + "\"><span class=\"status\">" + status + "</span>" + prefix +
       HtmlEscape(c.explanation.empty() ? c.expression : c.explanation) + "</li>\n";
}

void WriteOom(const VariantResult& v, std::string& h) {
  const OomDetail& o = *v.measurement->oom;
  h += "<div class=\"oom\">\n<h3>Out of memory: " + HtmlEscape(v.name) + "</h3>\n";
  h += "<p>In <b>" + HtmlEscape(o.phase) + "</b>: asked for " + HtmlEscape(FormatBytes(o.requested_bytes)) + " with " +
       HtmlEscape(FormatBytes(o.live_bytes)) + " live under a cap of " + HtmlEscape(FormatBytes(o.cap_bytes)) +
       (o.injected ? " (an injected failure)" : "") + ".</p>\n";
  const LiveBreakdown& l = o.live;
  std::vector<std::pair<std::string_view, int64_t>> rows = {
      {"parameters", l.parameters_bytes},
      {"gradients", l.gradients_bytes},
      {"optimizer state", l.optimizer_state_bytes},
      {"inputs", l.inputs_bytes},
      {"activations and transient", l.activations_and_transient_bytes},
  };
  // One rank's buffers for collectives (scenario `parallel`): a row only where there are some.
  if (l.communication_bytes > 0) rows.emplace_back("communication buffers", l.communication_bytes);
  const double total = static_cast<double>(std::max<int64_t>(o.live_bytes, 1));
  h += "<table class=\"breakdown\">\n<tr><th>live</th><th>bytes</th><th>share</th></tr>\n";
  for (const auto& [what, bytes] : rows) {
    char share[32], bar[32];
    std::snprintf(share, sizeof share, "%.1f%%", 100.0 * static_cast<double>(bytes) / total);
    std::snprintf(bar, sizeof bar, "%.1f", 1.6 * 100.0 * static_cast<double>(bytes) / total);
    h += "<tr><td>" + std::string(what) + "</td><td class=\"num\">" + HtmlEscape(FormatBytes(bytes)) +
         "</td><td class=\"num\"><span class=\"bar\" style=\"width:" + bar + "px\"></span> " + share + "</td></tr>\n";
  }
  h += "</table>\n";
  if (!l.layers.empty()) {
    h += "<table class=\"layers\">\n<tr><th>layer</th><th>its forward left live</th></tr>\n";
    for (const auto& [layer, bytes] : l.layers) {
      h += "<tr><td>" + HtmlEscape(layer) + "</td><td class=\"num\">" + HtmlEscape(FormatBytes(bytes)) + "</td></tr>\n";
    }
    h += "</table>\n";
  }
  if (!o.message.empty()) h += "<pre class=\"message\">" + HtmlEscape(o.message) + "</pre>\n";
  h += "</div>\n";
}

void WriteScenario(const ScenarioResult& s, size_t index, bool baselines, std::string& h) {
  h += "<section class=\"scenario\" id=\"scenario-" + std::to_string(index + 1) + "\">\n";
  h += "<h2>" + Badge(s.code) + HtmlEscape(s.name) + "</h2>\n";
  if (!s.summary.empty()) h += "<p class=\"summary\">" + HtmlEscape(s.summary) + "</p>\n";
  h += "<p class=\"meta\">" + HtmlEscape(s.file) + " &middot; backend " + HtmlEscape(s.backend);
  if (!s.card.empty()) h += " &middot; card " + HtmlEscape(s.card);
  if (s.cap_bytes > 0) h += " &middot; cap " + HtmlEscape(FormatBytes(s.cap_bytes));
  if (s.duration_ms > 0) h += " &middot; " + FormatSeconds(s.duration_ms);
  h += "</p>\n";
  if (!s.error.empty()) h += "<pre class=\"error\">" + HtmlEscape(s.error) + "</pre>\n";
  bool measured = false;
  for (const VariantResult& v : s.variants) measured = measured || v.measurement.has_value();
  if (std::string svg = RenderTimelineSvg(s, kHtmlChartWidth, kHtmlChartHeight); !svg.empty()) {
    h += svg;
  } else if (measured) {
    h += "<p class=\"meta\">No memory timeline was recorded.</p>\n";
  }
  if (!s.variants.empty()) WriteVariantTable(s, baselines, h);
  bool any_check = !s.checks.empty();
  for (const VariantResult& v : s.variants) any_check = any_check || !v.checks.empty();
  if (any_check) {
    h += "<h3>Checks</h3>\n<ul class=\"checks\">\n";
    for (const VariantResult& v : s.variants) {
      for (const CheckResult& c : v.checks) WriteCheck(c, HtmlEscape(v.name) + ": ", h);
    }
    for (const CheckResult& c : s.checks) WriteCheck(c, "", h);
    h += "</ul>\n";
  }
  for (const VariantResult& v : s.variants) {
    if (v.measurement && v.measurement->oom) WriteOom(v, h);
  }
  h += "</section>\n";
}

}  // namespace

std::string RenderHtml(const RunResults& report) {
  bool failing = false;
  for (const ScenarioResult& s : report.scenarios) failing = failing || IsFailure(s.code);
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += std::string("<title>oomguard: ") + (failing ? "FAIL" : "PASS") + ", " + Scenarios(report.scenarios.size()) +
       " on " + HtmlEscape(report.backend) + "</title>\n";
  h += "<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n<main>\n";
  WriteHeader(report, h);
  for (size_t i = 0; i < report.scenarios.size(); ++i) {
    WriteScenario(report.scenarios[i], i, report.compared_with_baselines, h);
  }
  h += "</main>\n</body>\n</html>\n";
  return h;
}

}  // namespace oomguard
