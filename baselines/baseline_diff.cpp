#include "baselines/baseline_diff.h"

#include <cstdio>

#include "base/byte_size.h"

namespace oomguard {
namespace {

MetricDiff Diff(const std::string& metric, int64_t baseline, int64_t current, const Tolerance& tolerance) {
  MetricDiff d;
  d.metric = metric;
  d.baseline = baseline;
  d.current = current;
  d.delta = current - baseline;
  d.delta_percent = baseline == 0 ? 0 : 100.0 * static_cast<double>(d.delta) / static_cast<double>(baseline);
  const int64_t allowed = tolerance.Allowed(baseline);
  d.verdict = d.delta > allowed    ? BaselineVerdict::kRegressed
              : -d.delta > allowed ? BaselineVerdict::kImproved
                                   : BaselineVerdict::kUnchanged;
  return d;
}

std::string Describe(const MetricDiff& d) {
  const bool bytes = d.metric != "alloc_count";
  char percent[32];
  std::snprintf(percent, sizeof percent, "%+.1f%%", d.delta_percent);
  const std::string current = bytes ? FormatBytes(d.current) : std::to_string(d.current);
  const std::string baseline = bytes ? FormatBytes(d.baseline) : std::to_string(d.baseline);
  const std::string delta = bytes ? FormatSignedBytes(d.delta) : (d.delta > 0 ? "+" : "") + std::to_string(d.delta);
  return d.metric + " " + current + " vs baseline " + baseline + " (" + delta + ", " + percent + ")";
}

}  // namespace

BaselineComparison CompareWithBaseline(const BaselineFile& file, const std::string& path, const VariantMeasurement& m) {
  BaselineComparison c;
  c.baseline_file = path;
  const BaselineEntry* entry = file.Find(m.variant, m.backend, m.cap_bytes, BaselineKernels(m), BaselineParallel(m));
  if (entry == nullptr) {
    c.verdict = BaselineVerdict::kNew;
    return c;
  }
  const BaselineEntry now = EntryFromMeasurement(m);
  auto add = [&](const std::string& metric, int64_t baseline, int64_t current) {
    c.metrics.push_back(Diff(metric, baseline, current, file.ToleranceFor(metric)));
  };
  add("peak_bytes", entry->peak_bytes, now.peak_bytes);
  for (const auto& [phase, bytes] : now.phase_peaks) {
    if (auto it = entry->phase_peaks.find(phase); it != entry->phase_peaks.end()) {
      add("phase_peak." + phase, it->second, bytes);
    }
  }
  for (size_t i = 0; i < now.live_after.size() && i < entry->live_after.size(); ++i) {
    add("live_after[" + std::to_string(i + 1) + "]", entry->live_after[i], now.live_after[i]);
  }
  add("alloc_count", entry->alloc_count, now.alloc_count);
  for (size_t r = 0; r < now.rank_peaks.size() && r < entry->rank_peaks.size(); ++r) {  // real ranks
    add("rank_peak[" + std::to_string(r) + "]", entry->rank_peaks[r], now.rank_peaks[r]);
  }
  c.verdict = BaselineVerdict::kUnchanged;
  for (const MetricDiff& d : c.metrics) {
    c.verdict = WorseBaselineVerdict(c.verdict, d.verdict);
  }
  return c;
}

std::vector<std::string> BaselineFailures(const BaselineComparison& comparison, bool strict) {
  std::vector<std::string> failures;
  for (const MetricDiff& d : comparison.metrics) {
    if (d.verdict == BaselineVerdict::kRegressed) failures.push_back("regression: " + Describe(d));
  }
  if (strict && comparison.verdict == BaselineVerdict::kNew) {
    failures.push_back("no baseline in " + comparison.baseline_file +
                       " (--strict); record one with --update-baselines");
  }
  return failures;
}

}  // namespace oomguard
