// --update-baselines: records what a run measured as the new baselines, for the variants that met
// their expectations, and says what changed. Files are written atomically (temp file, fsync,
// rename), and only when their content changes, so an interrupted update leaves every baseline
// either old or new. Each file's load, merge and write holds the folder's lock (kBaselinesLockFile), so
// updates that run at once lose no entry.
#pragma once

#include <ostream>
#include <string>

#include "model/run_results.h"

namespace oomguard {

// The lock file an update holds in each baselines folder it writes; it stays, empty, and is no baseline
// (baselines are NAME.json).
inline constexpr const char* kBaselinesLockFile = ".update.lock";

// Prints one line per change to `out`. A scenario whose baseline file cannot be read or written is
// passed over ("  not written NAME: why") and the others are still written; then false, naming them.
// `baselines_dir`: --baselines DIR, or empty for baselines/ beside each scenario file.
[[nodiscard]] bool UpdateBaselines(const RunResults& report, const std::string& baselines_dir, std::ostream& out,
                                   std::string* error);

}  // namespace oomguard
