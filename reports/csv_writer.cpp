#include "reports/csv_writer.h"

#include <cstdio>
#include <vector>

namespace oomguard {
namespace {

std::string Text(const std::string& s) {
  std::string out = !s.empty() && std::string_view("=+-@").find(s.front()) != std::string_view::npos ? "'" + s : s;
  if (out.find_first_of(",\"\r\n") == std::string::npos) return out;
  std::string quoted = "\"";
  for (const char c : out) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string Percent(double percent) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", percent);
  return std::string(buffer) == "-0.0" ? "0.0" : buffer;
}

std::string Row(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) line += (i ? "," : "") + cells[i];
  return line + "\r\n";
}

std::vector<std::string> Cells(const ScenarioResult& s, const VariantResult* v) {
  std::vector<std::string> cells = {Text(s.name),
                                    v ? Text(v->name) : "",
                                    Text(s.backend),
                                    Text(s.card),
                                    s.cap_bytes > 0 ? std::to_string(s.cap_bytes) : "",
                                    std::string(ResultName(v ? v->code : s.code))};
  const VariantMeasurement* m = v && v->measurement ? &*v->measurement : nullptr;
  cells.push_back(m ? Text(Name(m->outcome)) : "");
  cells.push_back(m ? std::to_string(m->ledger.peak_bytes) : "");
  cells.push_back(m ? Text(m->ledger.peak_phase) : "");
  cells.push_back(m && !m->iterations.empty() ? std::to_string(m->iterations.back().live_after_bytes) : "");
  const MetricDiff* peak = v ? PeakDiff(v->baseline) : nullptr;
  cells.push_back(peak ? std::to_string(peak->baseline) : "");
  cells.push_back(peak ? std::to_string(peak->delta) : "");
  cells.push_back(peak ? Percent(peak->delta_percent) : "");
  cells.push_back(v && v->baseline.verdict != BaselineVerdict::kNotCompared
                      ? std::string(BaselineVerdictName(v->baseline.verdict))
                      : "");
  return cells;
}

}  // namespace

std::string RenderCsv(const RunResults& report) {
  std::string out = Row({"scenario", "variant", "backend", "card", "cap_bytes", "result", "outcome", "peak_bytes",
                         "peak_phase", "live_after_last_bytes", "baseline_peak_bytes", "peak_delta_bytes",
                         "peak_delta_percent", "baseline_verdict"});
  for (const ScenarioResult& s : report.scenarios) {
    if (s.variants.empty()) out += Row(Cells(s, nullptr));
    for (const VariantResult& v : s.variants) out += Row(Cells(s, &v));
  }
  return out;
}

}  // namespace oomguard
