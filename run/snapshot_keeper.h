// Which memory_viz snapshots `oomguard run --snapshot-dir DIR` keeps, decided in the parent once a
// scenario is judged: every child records its variant into the run's scratch folder, because only the
// parent knows whether a check between variants or a baseline failed.
//
//   oomguard::KeepSnapshots(options.snapshot_dir, options.snapshot_all, &scenario_result);
//
// A variant's snapshot is kept, moved to DIR/<scenario>.<variant>.<backend>.pickle, when the variant
// ran out of memory or failed with an error, when it or its scenario did not PASS (a failed check, a
// regression against its baseline), or with --snapshot-all; the others are deleted. The measurement's
// `snapshot` then names the kept file, or is empty.
//
// Error policy: a snapshot that cannot be moved is reported in the measurement's snapshot_error; the
// variant's result stands.
#pragma once

#include <string>

#include "model/run_results.h"

namespace oomguard {

void KeepSnapshots(const std::string& dir, bool all, ScenarioResult* result);

}  // namespace oomguard
