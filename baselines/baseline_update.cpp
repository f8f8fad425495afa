#include "baselines/baseline_update.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/atomic_file.h"
#include "base/byte_size.h"
#include "base/did_you_mean.h"
#include "base/file_lock.h"
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

// Test hook: OOMGUARD_TEST_BASELINE_PAUSE_MS=N sleeps N ms between loading a baseline file and writing
// it, widening the window in which an unlocked concurrent update would lose entries (D25). Only tests
// set it.
void PauseForTests() {
  const char* pause = std::getenv("OOMGUARD_TEST_BASELINE_PAUSE_MS");
  if (pause != nullptr && *pause != '\0') std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(pause)));
}

}  // namespace

bool UpdateBaselines(const RunResults& report, const std::string& baselines_dir, std::ostream& out,
                     std::string* error) {
  int written = 0;
  std::vector<std::string> failed;  // one scenario's unreadable baseline must not stop the others'
  for (const ScenarioResult& s : report.scenarios) {
    if (s.variants.empty()) continue;
    const std::string dir = BaselineDirectory(baselines_dir, s.file);
    const std::string path = BaselinePath(dir, s.name);
    BaselineFile file;
    std::string why;
    // Note [One lock per baselines folder]: the load, merge and write of each file holds the folder's
    // lock, so concurrent updates each add their entries and none is lost (D25). One lock for the folder
    // rather than one per file: the section is milliseconds long, one hidden file is left instead of one
    // per scenario, and the temporaries of killed writers (Note [Output paths]) are cleaned under it,
    // whatever file they belonged to and whether or not this update changes anything (D33).
    FileLock lock;
    if (!MakeDirectories(dir, &why) || !lock.Acquire(dir + "/" + kBaselinesLockFile, &why) ||
        !LoadScenarioBaseline(dir, s.name, &file, &why)) {
      out << "  not written " << s.name << ": " << why << "\n";
      failed.push_back(s.name);
      continue;
    }
    RemoveStaleTemporaries(dir);
    PauseForTests();
    const std::string before = file.exists ? SerializeBaselineFile(file) : "";
    file.scenario = s.name;
    file.oomguard_version = report.oomguard_version;
    file.libtorch_version = report.libtorch_version;
    for (const VariantResult& v : s.variants) {
      // Only what ran successfully: a variant that missed its expectations keeps its old baseline.
      if (!v.measurement || (v.code != ResultCode::kPass && v.code != ResultCode::kXFail)) {
        if (IsFailure(v.code)) {
          out << "  not recorded " << s.name << "/" << v.name << ": " << ResultName(v.code)
              << " (a baseline records runs that pass; any entry it has stays as it was)\n";
        }
        continue;
      }
      const BaselineEntry now = EntryFromMeasurement(*v.measurement);
      const BaselineEntry* old = file.Find(now.variant, now.backend, now.cap_bytes, now.kernels, now.parallel);
      if (old == nullptr) {
        out << "  new        " << s.name << "/" << v.name << ": peak " << FormatBytes(now.peak_bytes) << "\n";
      } else if (old->peak_bytes != now.peak_bytes || old->phase_peaks != now.phase_peaks ||
                 old->live_after != now.live_after || old->alloc_count != now.alloc_count) {
        out << "  changed    " << s.name << "/" << v.name << ": " << DescribeChange(*old, now) << "\n";
      }
      file.Put(now);
    }
    if (!file.exists && file.entries.empty()) continue;  // nothing passed: no file of no entries
    const std::string after = SerializeBaselineFile(file);
    if (after == before) continue;
    if (!WriteFileAtomically(path, after, &why)) {
      out << "  not written " << s.name << ": " << why << "\n";
      failed.push_back(s.name);
      continue;
    }
    ++written;
  }
  out << "baselines: " << written << " file(s) written";
  if (!failed.empty()) out << ", " << failed.size() << " not (" << JoinNames(failed, ", ") << ")";
  out << "\n";
  if (!failed.empty()) {
    *error = "--update-baselines: " + std::to_string(failed.size()) +
             " baseline file(s) could not be written: " + JoinNames(failed, ", ");
    return false;
  }
  return true;
}

}  // namespace oomguard
