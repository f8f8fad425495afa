#include "reports/markdown_writer.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

#include "base/byte_size.h"
#include "model/diagnosis_text.h"
#include "model/metric_names.h"
#include "reports/escape.h"
#include "reports/rank_text.h"
#include "reports/report_format.h"

namespace oomguard {
namespace {

constexpr const char* kNone = "—";

std::string Plural(size_t n, const std::string& word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

std::string Card(const ScenarioResult& s) {
  const std::string limit = CardOrCap(s.card, s.cap_bytes);
  return limit.empty() ? kNone : MarkdownText(limit);
}

std::string Label(const ScenarioResult& s, const VariantResult& v) {
  return MarkdownText(s.name) + " / " + MarkdownText(v.name);
}

struct Row {
  const ScenarioResult* scenario;
  const VariantResult* variant;  // null: the row of a scenario without variants
  int group;                     // 0 regression, 1 other failure, 2 the rest
};

std::vector<Row> TableRows(const RunResults& report) {
  std::vector<Row> rows;
  for (const ScenarioResult& s : report.scenarios) {
    if (s.variants.empty()) rows.push_back({&s, nullptr, IsFailure(s.code) ? 1 : 2});
    for (const VariantResult& v : s.variants) {
      const int group = v.baseline.verdict == BaselineVerdict::kRegressed ? 0 : IsFailure(v.code) ? 1 : 2;
      rows.push_back({&s, &v, group});
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.group < b.group; });
  return rows;
}

std::string ResultCell(ResultCode code, const VariantResult* v) {
  const std::string name(ResultName(code));
  std::string out = IsFailure(code) ? "**" + name + "**" : name;
  if (v == nullptr) return out;
  std::vector<std::string> notes;
  if (v->measurement && v->measurement->outcome.kind != Outcome::kPass) {
    notes.push_back(MarkdownText(Name(v->measurement->outcome)));
  }
  if (v->baseline.verdict == BaselineVerdict::kRegressed) notes.push_back("regressed");
  if (v->baseline.verdict == BaselineVerdict::kImproved) notes.push_back("improved");
  if (v->baseline.verdict == BaselineVerdict::kNew) notes.push_back("no baseline");
  for (size_t i = 0; i < notes.size(); ++i) out += (i == 0 ? " (" : ", ") + notes[i];
  return notes.empty() ? out : out + ")";
}

void WriteTable(const std::vector<Row>& rows, std::string* out) {
  // reserved: the caching allocator model's reserved peak beside the ledger's (allocated) peak.
  *out += "| scenario | variant | backend | card | outcome | peak | reserved | baseline | delta | delta % | peak phase |\n";
  *out += "|---|---|---|---|---|---:|---:|---:|---:|---:|---|\n";
  for (const Row& r : rows) {
    const ScenarioResult& s = *r.scenario;
    const VariantResult* v = r.variant;
    std::vector<std::string> cells = {MarkdownText(s.name), v ? MarkdownText(v->name) : kNone, MarkdownText(s.backend),
                                      Card(s), ResultCell(v ? v->code : s.code, v)};
    const VariantMeasurement* m = v && v->measurement ? &*v->measurement : nullptr;
    cells.push_back(m ? FormatBytes(m->ledger.peak_bytes) : kNone);
    cells.push_back(m && m->cuda_model ? FormatBytes(m->cuda_model->reserved_peak_bytes) : kNone);
    if (const MetricDiff* d = v ? PeakDiff(v->baseline) : nullptr) {
      cells.push_back(FormatMetricValue(d->metric, d->baseline, false));
      cells.push_back(FormatMetricValue(d->metric, d->delta, true));
      cells.push_back(FormatPercent(d->delta_percent));
    } else {
      cells.insert(cells.end(), 3, kNone);
    }
    cells.push_back(m && !m->ledger.peak_phase.empty() ? MarkdownText(m->ledger.peak_phase) : kNone);
    *out += "|";
    for (const std::string& cell : cells) *out += " " + cell + " |";
    *out += "\n";
  }
}

void WriteRegressions(const std::vector<Row>& rows, std::string* out) {
  if (rows.empty() || rows.front().group != 0) return;
  *out += "\n### Regressions\n";
  for (const Row& r : rows) {
    if (r.group != 0) break;
    const BaselineComparison& b = r.variant->baseline;
    *out += "\n" + Label(*r.scenario, *r.variant) + " (" + MarkdownText(r.scenario->backend) + ", " +
            Card(*r.scenario) + "), against " + MarkdownText(b.baseline_file) + ":\n\n";
    *out += "| metric | baseline | current | delta | delta % | verdict |\n|---|---:|---:|---:|---:|---|\n";
    for (const MetricDiff& d : b.metrics) {
      const char* verdict = d.verdict == BaselineVerdict::kRegressed  ? "**regressed**"
                            : d.verdict == BaselineVerdict::kImproved ? "improved"
                                                                      : "within tolerance";
      *out += "| " + MarkdownText(d.metric) + " | " + FormatMetricValue(d.metric, d.baseline, false) + " | " +
              FormatMetricValue(d.metric, d.current, false) + " | " + FormatMetricValue(d.metric, d.delta, true) +
              " | " + FormatPercent(d.delta_percent) + " | " + verdict + " |\n";
    }
  }
}

void WriteFailures(const RunResults& report, std::string* out) {
  std::string items;
  const auto item = [&items](const std::string& title, const std::vector<std::string>& lines) {
    items += "- " + title + "\n";
    for (const std::string& line : lines) items += "  - " + MarkdownText(line) + "\n";
  };
  for (const ScenarioResult& s : report.scenarios) {
    if (IsFailure(s.code) && !s.error.empty())
      item("**" + MarkdownText(s.name) + "**: " + std::string(ResultName(s.code)), {s.error});
    for (const VariantResult& v : s.variants) {
      if (!IsFailure(v.code)) continue;
      std::vector<std::string> lines = v.reasons;
      if (!v.diagnostics.empty()) lines.push_back("stderr: " + v.diagnostics);
      item("**" + Label(s, v) + "**: " + std::string(ResultName(v.code)), lines);
    }
    std::vector<std::string> failed;
    for (const CheckResult& c : s.checks) {
      if (!c.holds && !c.skipped) failed.push_back(c.explanation);
    }
    if (!failed.empty()) item("**" + MarkdownText(s.name) + "**, checks between variants: FAIL", failed);
  }
  if (!items.empty()) *out += "\n### Failures\n\n" + items;
}

// What the detectors found, pitfalls before advice, each with its fix and the best measured one.
void WriteDiagnoses(const RunResults& report, std::string* out) {
  std::string rows;
  for (bool advice : {false, true}) {
    for (const ScenarioResult& s : report.scenarios) {
      for (const VariantResult& v : s.variants) {
        if (!v.measurement) continue;
        for (const Diagnosis& d : v.measurement->diagnoses) {
          if (IsAdvice(d.kind) != advice) continue;
          const std::string measured =
              d.measured.empty() ? "" : MeasuredFixText(d.measured.front(), v.measurement->ledger.peak_bytes);
          rows += "| " + Label(s, v) + " | " + MarkdownText(s.backend) + " | " + MarkdownText(DiagnosisLabel(d)) +
                  " | " + MarkdownText(DiagnosisAmount(d)) + " | " + MarkdownText(d.message) + " | " +
                  MarkdownText(d.fix) + " | " + MarkdownText(measured) + " |\n";
        }
      }
    }
  }
  if (rows.empty()) return;
  *out +=
      "\n### Diagnoses\n\n| variant | backend | diagnosis | bytes | found | fix | fix measured |\n"
      "|---|---|---|---|---|---|---|\n" +
      rows;
}

// The variants of a scenario's `parallel`: which rank of which world, the strategy and the precision it
// ran at, a row each.
void WriteParallel(const RunResults& report, std::string* out) {
  std::string rows;
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) {
      if (!v.measurement || !v.measurement->parallel) continue;
      const ParallelMeasurement& p = *v.measurement->parallel;
      rows += "| " + Label(s, v) + " | " + std::to_string(p.rank) + " of " + std::to_string(p.world) + " | " +
              MarkdownText(StrategyText(p)) + " |\n";
    }
  }
  if (!rows.empty()) *out += "\n### Parallel\n\n| variant | rank | strategy |\n|---|---|---|\n" + rows;
}

// Real ranks (cpu): every rank's peak and shares, a row each.
void WriteRanks(const RunResults& report, std::string* out) {
  std::string rows;
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) {
      if (!v.measurement) continue;
      for (const RankMeasurement& r : v.measurement->ranks) {
        const auto bytes = [&r](int64_t b) { return r.measured ? FormatBytes(b) : std::string(kNone); };
        const auto maybe = [&r](const std::optional<int64_t>& b) {
          return r.measured && b ? FormatBytes(*b) : std::string(kNone);
        };
        rows += "| " + Label(s, v) + " | " + std::to_string(r.rank) + " | " +
                MarkdownText(r.ended ? "ended" : Name(r.outcome)) + " | " + bytes(r.peak_bytes) + " | " +
                (r.measured ? MarkdownText(r.peak_phase) : kNone) + " | " + bytes(r.param_bytes) + " | " +
                maybe(r.grad_bytes) + " | " + maybe(r.optimizer_state_bytes) + " | " + bytes(r.communication_bytes) +
                " |\n";
      }
    }
  }
  if (rows.empty()) return;
  *out +=
      "\n### Ranks\n\n| variant | rank | outcome | peak | peak phase | parameters | gradients | optimizer state | "
      "communication |\n|---|---|---|---|---|---|---|---|---|\n" +
      rows;
}

void WriteBaselineNotes(const RunResults& report, std::string* out) {
  if (report.updating_baselines) return;  // the run records them
  std::vector<std::string> improved, fresh;
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) {
      if (v.baseline.verdict == BaselineVerdict::kNew) fresh.push_back(Label(s, v));
      if (v.baseline.verdict != BaselineVerdict::kImproved) continue;
      std::string label = Label(s, v);
      if (const MetricDiff* d = PeakDiff(v.baseline)) {
        label += " (" + MarkdownText(d->metric) + " " + FormatMetricValue(d->metric, d->delta, true) + ", " +
                 FormatPercent(d->delta_percent) + ")";
      }
      improved.push_back(label);
    }
  }
  const auto join = [](const std::vector<std::string>& labels) {
    std::string joined;
    for (const std::string& label : labels) joined += (joined.empty() ? "" : "; ") + label;
    return joined;
  };
  if (!improved.empty()) {
    *out += "\n" + Plural(improved.size(), "variant") + " improved beyond tolerance: " + join(improved) +
            ". Run `oomguard run --update-baselines` to record the new figures.\n";
  }
  if (!fresh.empty()) {
    *out += "\n" + Plural(fresh.size(), "variant") + " without a stored baseline: " + join(fresh) + ". " +
            (report.strict ? "They fail under `--strict`" : "They pass for now; `--strict` makes them fail") +
            ", and `oomguard run --update-baselines` records one.\n";
  }
}

std::string VerdictLine(const RunResults& report) {
  size_t failing = 0, regressions = 0;
  for (const ScenarioResult& s : report.scenarios) {
    failing += IsFailure(s.code);
    for (const VariantResult& v : s.variants) regressions += v.baseline.verdict == BaselineVerdict::kRegressed;
  }
  const std::string regressed = regressions ? Plural(regressions, "memory regression") : "no memory regressions";
  const size_t n = report.scenarios.size();
  if (failing == 0) return "**oomguard: PASS** — " + Plural(n, "scenario") + ", none failing, " + regressed;
  return "**oomguard: FAIL** — " + std::to_string(failing) + " of " + Plural(n, "scenario") + " failing, " + regressed;
}

std::string ContextLine(const RunResults& report) {
  std::string out = "Backend " + MarkdownText(report.backend) + ", " + FormatSeconds(report.duration_ms);
  if (report.compared_with_baselines)
    out += report.strict ? ", compared with baselines (strict)" : ", compared with baselines";
  if (!report.oomguard_version.empty()) out += "; oomguard " + MarkdownText(report.oomguard_version);
  if (!report.libtorch_version.empty()) out += ", LibTorch " + MarkdownText(report.libtorch_version);
  return out + ".";
}

}  // namespace

std::string RenderMarkdown(const RunResults& report) {
  std::string out = VerdictLine(report) + "\n\n" + ContextLine(report) + "\n";
  const std::vector<Row> rows = TableRows(report);
  if (!rows.empty()) {
    out += "\n";
    WriteTable(rows, &out);
  }
  WriteRegressions(rows, &out);
  WriteFailures(report, &out);
  WriteDiagnoses(report, &out);
  WriteParallel(report, &out);
  WriteRanks(report, &out);
  WriteBaselineNotes(report, &out);
  return out;
}

}  // namespace oomguard
