// --update-baselines: records what a run measured as the new baselines, for the variants that met
// their expectations, and says what changed. Files are written atomically (temp file, fsync,
// rename), and only when their content changes, so an interrupted update leaves every baseline
// either old or new.
#pragma once

#include <ostream>
#include <string>

#include "model/run_results.h"

namespace oomguard {

// Prints one line per change to `out`. A scenario whose baseline file cannot be read or written is
// passed over ("  not written NAME: why") and the others are still written; then false, naming them.
// `baselines_dir`: --baselines DIR, or empty for baselines/ beside each scenario file.
[[nodiscard]] bool UpdateBaselines(const RunResults& report, const std::string& baselines_dir, std::ostream& out,
                                   std::string* error);

}  // namespace oomguard
