#include "baselines/baseline_update.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "base/atomic_file.h"
#include "base/byte_size.h"
#include "baselines/baseline_store.h"

namespace oomguard {
namespace {

// What moved, most telling first: the peak, else which other recorded numbers did.
std::string DescribeChange(const BaselineEntry& old, const BaselineEntry& now) {
  if (old.peak_bytes != now.peak_bytes) {
    return "peak " + FormatBytes(old.peak_bytes) + " -> " + FormatBytes(now.peak_bytes) + " (" +
           FormatSignedBytes(now.peak_bytes - old.peak_bytes) + ")";
  }
  std::string moved;
  if (old.phase_peaks != now.phase_peaks) moved += "phase peaks, ";
  if (old.live_after != now.live_after) moved += "live_after, ";
  if (old.alloc_count != now.alloc_count) {
    moved += "alloc_count " + std::to_string(old.alloc_count) + " -> " + std::to_string(now.alloc_count) + ", ";
  }
  return moved + "peak unchanged (" + FormatBytes(now.peak_bytes) + ")";
}

}  // namespace

bool UpdateBaselines(const RunResults& report, const std::string& baselines_dir, std::ostream& out,
                     std::string* error) {
  int written = 0;
  for (const ScenarioResult& s : report.scenarios) {
    if (s.variants.empty()) continue;
    const std::string dir = BaselineDirectory(baselines_dir, s.file);
    const std::string path = BaselinePath(dir, s.name);
    BaselineFile file;
    if (!LoadBaselineFile(path, &file, error)) return false;
    const std::string before = file.exists ? SerializeBaselineFile(file) : "";
    file.scenario = s.name;
    file.oomguard_version = report.oomguard_version;
    file.libtorch_version = report.libtorch_version;
    for (const VariantResult& v : s.variants) {
      // Only what ran successfully: a variant that missed its expectations keeps its old baseline.
      if (!v.measurement || (v.code != ResultCode::kPass && v.code != ResultCode::kXFail)) continue;
      const BaselineEntry now = EntryFromMeasurement(*v.measurement);
      const BaselineEntry* old = file.Find(now.variant, now.backend, now.cap_bytes);
      if (old == nullptr) {
        out << "  new        " << s.name << "/" << v.name << ": peak " << FormatBytes(now.peak_bytes) << "\n";
      } else if (old->peak_bytes != now.peak_bytes || old->phase_peaks != now.phase_peaks ||
                 old->live_after != now.live_after || old->alloc_count != now.alloc_count) {
        out << "  changed    " << s.name << "/" << v.name << ": " << DescribeChange(*old, now) << "\n";
      }
      file.Put(now);
    }
    const std::string after = SerializeBaselineFile(file);
    if (after == before) continue;
    if (!MakeDirectories(dir, error) || !WriteFileAtomically(path, after, error)) return false;
    ++written;
  }
  out << "baselines: " << written << " file(s) written\n";
  return true;
}

}  // namespace oomguard
