#include "reports/console_writer.h"

#include <cstdio>
#include <map>

#include "allocators/byte_size.h"
#include "harness/baseline_diff.h"
#include "harness/metrics.h"

namespace oomguard {
namespace {

std::string Seconds(double ms) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f s", ms / 1000.0);
  return buffer;
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// "unchanged", "new", or the peak's change: "+1.80 MiB (+11.1%) regressed".
std::string BaselineWord(const BaselineComparison& c) {
  if (c.verdict == BaselineVerdict::kNew) return "new";
  for (const MetricDiff& d : c.metrics) {
    if (d.metric != "peak_bytes" || d.delta == 0) continue;
    char percent[32];
    std::snprintf(percent, sizeof percent, "%+.1f%%", d.delta_percent);
    return FormatSignedBytes(d.delta) + " (" + percent + ") " + std::string(BaselineVerdictName(c.verdict));
  }
  return std::string(BaselineVerdictName(c.verdict));
}

}  // namespace

void WriteScenarioBlock(const ScenarioResult& s, std::ostream& out, bool detailed) {
  out << Pad(std::string(ResultName(s.code)), 12) << s.name << "  [" << s.backend;
  if (!s.card.empty()) out << ", " << s.card;
  if (s.cap_bytes > 0) out << ", cap " << FormatBytes(s.cap_bytes);
  out << "]";
  if (s.duration_ms > 0) out << "  " << Seconds(s.duration_ms);
  out << "\n";
  if (!s.error.empty()) out << "            " << s.error << "\n";
  size_t width = 0, outcome_width = 0;
  for (const VariantResult& v : s.variants) {
    width = std::max(width, v.name.size());
    if (v.measurement) outcome_width = std::max(outcome_width, v.measurement->outcome.size());
  }
  for (const VariantResult& v : s.variants) {
    out << "            " << Pad(v.name, width + 2) << Pad(std::string(ResultName(v.code)), 12);
    if (v.measurement) {
      const VariantMeasurement& m = *v.measurement;
      out << Pad(m.outcome, outcome_width + 2) << "peak " << Pad(FormatBytes(m.ledger.peak_bytes), 12) << "in "
          << m.ledger.peak_phase;
      if (auto growth = LiveGrowthPerIteration(m); growth && m.outcome == "pass") {
        out << "  growth " << FormatSignedBytes(static_cast<int64_t>(*growth)) << "/iteration";
      }
      if (v.baseline.verdict != BaselineVerdict::kNotCompared) out << "  baseline " << BaselineWord(v.baseline);
      if (m.transfers > 0 && !m.iterations.empty()) {
        out << "  transfers " << m.transfers / static_cast<int64_t>(m.iterations.size()) << "/step";
      }
    }
    out << "\n";
    if (v.measurement && v.measurement->oom && v.code != ResultCode::kPass) {
      const OomReport& o = *v.measurement->oom;
      out << "              OOM in " << o.phase << ": tried to allocate " << FormatBytes(o.requested_bytes) << " with "
          << FormatBytes(o.live_bytes) << " live: parameters " << FormatBytes(o.live.parameters_bytes)
          << ", gradients " << FormatBytes(o.live.gradients_bytes) << ", optimizer state "
          << FormatBytes(o.live.optimizer_state_bytes) << ", inputs " << FormatBytes(o.live.inputs_bytes)
          << ", activations and transient " << FormatBytes(o.live.activations_and_transient_bytes) << "\n";
    }
    if (detailed && v.measurement) {
      out << "              phase peaks:";
      const char* separator = " ";
      for (const PhasePeak& p : v.measurement->ledger.phase_peaks) {
        out << separator << p.phase << " " << FormatBytes(p.peak_bytes);
        separator = ", ";
      }
      out << "\n";
      for (const CheckResult& c : v.checks) {
        if (c.holds) out << "              ok     " << c.explanation << "\n";
      }
    }
    for (const std::string& reason : v.reasons) out << "              " << reason << "\n";
    if (!v.diagnostics.empty()) out << "              stderr: " << v.diagnostics << "\n";
  }
  for (const CheckResult& c : s.checks) {
    out << "            " << (c.holds ? "ok     " : c.skipped ? "skip   " : "FAILED ") << c.explanation << "\n";
  }
}

void WriteRunSummary(const RunReport& report, std::ostream& out) {
  std::map<std::string, int> counts;
  int failures = 0;
  for (const ScenarioResult& s : report.scenarios) {
    ++counts[std::string(ResultName(s.code))];
    failures += IsFailure(s.code);
  }
  out << "\n" << report.scenarios.size() << " scenarios on " << report.backend << " in " << Seconds(report.duration_ms)
      << ":";
  for (const auto& [code, n] : counts) out << " " << n << " " << code;
  out << (failures ? "  (" + std::to_string(failures) + " failing)" : "") << "\n";
  int improved = 0, fresh = 0;
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) {
      improved += v.baseline.verdict == BaselineVerdict::kImproved;
      fresh += v.baseline.verdict == BaselineVerdict::kNew;
    }
  }
  if (improved > 0) {
    out << improved << " variant(s) use less memory than their baseline: record it with --update-baselines\n";
  }
  if (fresh > 0 && !report.strict) {
    out << fresh << " variant(s) have no baseline yet (--strict fails them; --update-baselines records them)\n";
  }
}

}  // namespace oomguard
