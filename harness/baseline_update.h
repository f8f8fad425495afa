// --update-baselines: records what a run measured as the new baselines, for the variants that met
// their expectations, and says what changed. Files are written atomically (temp file, fsync,
// rename), and only when their content changes, so an interrupted update leaves every baseline
// either old or new.
#pragma once

#include <ostream>
#include <string>

#include "harness/run_options.h"
#include "harness/run_results.h"

namespace oomguard {

// Returns false (and *error) when a file cannot be written; prints one line per change to `out`.
[[nodiscard]] bool UpdateBaselines(const RunReport& report, const RunOptions& options, std::ostream& out,
                                   std::string* error);

}  // namespace oomguard
