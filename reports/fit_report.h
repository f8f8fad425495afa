// The output of `oomguard fit`: the table on stdout and the JSON file (--json), both rendered from a
// FitResults (model/fit_results.h).
//
//   forgotten-no-grad on meta: the largest data.batch that fits each card (searched 1..1048576)
//
//   card       cap         pitfall                fixed                  trials
//   t4         14.33 GiB   23157 (14.33 GiB)      ...                    39
//
// A cell is the largest fitting value and the peak measured at it; "none" when not even the search's
// minimum fits, ">= MAX" when its maximum does, "error" when the search stopped (the error follows the
// table). With --knob world (FitResults::smallest) a column is a variant and its strategy, and a cell
// the smallest world size at which one rank fits, with that rank's peak; "none" when not even the
// largest world searched fits (or, for ddp and a workload that shards nothing, the first: its note
// says why), "<= MIN" when the smallest searched, above 1, does. The JSON file is described in
// scenarios/FORMAT.md ("The fit file").
//
// Error policy: WriteFitJson returns false with "cannot write FILE: reason"; nothing else can fail.
#pragma once

#include <ostream>
#include <string>

#include "model/fit_results.h"

namespace oomguard {

inline constexpr int kFitSchemaVersion = 1;

void WriteFitTable(const FitResults& report, std::ostream& out);

// The JSON text, indented, ending in a newline.
std::string FitJsonText(const FitResults& report);

// Writes FitJsonText atomically (atomic_file.h).
[[nodiscard]] bool WriteFitJson(const FitResults& report, const std::string& path, std::string* error);

}  // namespace oomguard
