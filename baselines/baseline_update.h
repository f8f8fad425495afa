// --update-baselines: records what a run measured as the new baselines, for the variants that met
// their expectations, and says what changed. Files are written atomically (temp file, fsync,
// rename), and only when their content changes, so an interrupted update leaves every baseline
// either old or new.
#pragma once

#include <ostream>
#include <string>

#include "model/run_results.h"

namespace oomguard {

// Returns false (and *error) when a file cannot be written; prints one line per change to `out`.
// `baselines_dir`: --baselines DIR, or empty for baselines/ beside each scenario file.
[[nodiscard]] bool UpdateBaselines(const RunResults& report, const std::string& baselines_dir, std::ostream& out,
                                   std::string* error);

}  // namespace oomguard
