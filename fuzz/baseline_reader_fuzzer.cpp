// Fuzzes the baseline reader (baselines/baseline_store.h) and the comparison that uses what it read
// (baselines/baseline_diff.h), through LoadBaselineText (LoadBaselineFile reads the file, then the
// same). Invariants: a file that loads round-trips through SerializeBaselineFile
// to the same contents; a measurement equal to an entry finds that entry.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "base/check.h"
#include "baselines/baseline_diff.h"
#include "baselines/baseline_store.h"

namespace oomguard {
namespace {

bool Same(const Tolerance& a, const Tolerance& b) {
  return a.relative == b.relative && a.absolute_bytes == b.absolute_bytes;
}

auto Key(const BaselineEntry& e) {
  return std::tie(e.variant, e.backend, e.cap_bytes, e.card, e.kernels, e.parallel, e.peak_bytes, e.phase_peaks,
                  e.live_after, e.alloc_count);
}

// Equal contents: the same entries in any order (the writer sorts them; equal keys may swap).
bool SameContents(const BaselineFile& a, const BaselineFile& b) {
  auto sorted = [](std::vector<BaselineEntry> entries) {
    std::sort(entries.begin(), entries.end(), [](const auto& x, const auto& y) { return Key(x) < Key(y); });
    return entries;
  };
  const std::vector<BaselineEntry> ea = sorted(a.entries), eb = sorted(b.entries);
  return a.scenario == b.scenario && a.oomguard_version == b.oomguard_version &&
         a.libtorch_version == b.libtorch_version && Same(a.tolerance, b.tolerance) &&
         std::equal(a.metric_tolerances.begin(), a.metric_tolerances.end(), b.metric_tolerances.begin(),
                    b.metric_tolerances.end(),
                    [](const auto& x, const auto& y) { return x.first == y.first && Same(x.second, y.second); }) &&
         ea.size() == eb.size() &&
         std::equal(ea.begin(), ea.end(), eb.begin(), [](const auto& x, const auto& y) { return Key(x) == Key(y); });
}

// What a run measuring exactly `entry` reports (its parallel key is text, made from a rank's
// ParallelMeasurement by BaselineParallel; a run of one process stands for it here).
VariantMeasurement MeasurementOf(const BaselineEntry& entry) {
  VariantMeasurement m;
  m.variant = entry.variant;
  m.backend = entry.backend;
  m.kernels = entry.kernels.empty() ? "cpu" : entry.kernels;
  m.cap_bytes = entry.cap_bytes;
  m.ledger.peak_bytes = entry.peak_bytes;
  m.ledger.alloc_count = entry.alloc_count;
  for (const auto& [phase, bytes] : entry.phase_peaks) m.ledger.phase_peaks.push_back({phase, bytes});
  for (const int64_t bytes : entry.live_after) m.iterations.push_back({.live_after_bytes = bytes});
  return m;
}

}  // namespace
}  // namespace oomguard

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oomguard;
  BaselineFile file;
  std::string error;
  if (!LoadBaselineText(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json", &file, &error)) {
    OOMGUARD_CHECK(!error.empty());
    return 0;
  }
  OOMGUARD_CHECK(file.exists);

  const std::string written = SerializeBaselineFile(file);
  BaselineFile reread;
  OOMGUARD_CHECK(LoadBaselineText(written, "fuzz.json", &reread, &error))
      << "SerializeBaselineFile wrote what LoadBaselineFile refuses: " << error << "\n"
      << written;
  OOMGUARD_CHECK(SameContents(file, reread)) << "the round trip changed the file:\n" << written;

  for (const BaselineEntry& entry : file.entries) {
    const VariantMeasurement m = MeasurementOf(entry);
    const BaselineComparison comparison = CompareWithBaseline(file, "fuzz.json", m);
    OOMGUARD_CHECK(file.Find(entry.variant, entry.backend, entry.cap_bytes, entry.kernels, entry.parallel) != nullptr);
    OOMGUARD_CHECK(comparison.verdict != BaselineVerdict::kNew || !entry.parallel.empty() ||
                   (entry.backend != "meta" && !entry.kernels.empty()))
        << "no entry found for its own measurement";
    BaselineFailures(comparison, /*strict=*/true);
    // And what a typical run measures, against whatever the file holds.
    VariantMeasurement typical = m;
    typical.ledger.peak_bytes = 10 << 20;
    for (PhasePeak& phase : typical.ledger.phase_peaks) phase.peak_bytes = 8 << 20;
    for (IterationMeasurement& iteration : typical.iterations) iteration.live_after_bytes = 4 << 20;
    typical.ledger.alloc_count = 200;
    BaselineFailures(CompareWithBaseline(file, "fuzz.json", typical), /*strict=*/false);
  }
  return 0;
}
