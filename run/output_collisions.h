// A run's outputs never destroy an input or one another (D26): before anything runs, every output file
// (--json, each --report) is compared with the others and with what the run reads, as files (links,
// "..", hard links: base/file_identity.h), not as spellings.
//
//   std::string error;
//   if (!CheckOutputsDistinct(options.outputs, &error)) { usage error: "--report md=x.md and --json x.md ..." }
//   if (!CheckOutputsSpareInputs(options.outputs, plan, options.baselines_dir, &error)) { usage error }
//
// A standard stream (/dev/stdout), a FIFO or a device is written into, never replaced, so any number of
// outputs may share it.
// Snapshots are named after their scenario and variant in their own folder and are not compared.
#pragma once

#include <string>
#include <vector>

#include "run/plan.h"
#include "run/run_options.h"

namespace oomguard {

// False, naming both flags, when two outputs write one file.
[[nodiscard]] bool CheckOutputsDistinct(const std::vector<OutputFile>& outputs, std::string* error);

// False, naming the output and the input, when an output is a file the plan reads: a scenario file, a
// TorchScript module a variant loads, or a scenario's baseline file (read to compare, and with
// --update-baselines written).
[[nodiscard]] bool CheckOutputsSpareInputs(const std::vector<OutputFile>& outputs, const RunPlan& plan,
                                           const std::string& baselines_dir, std::string* error);

}  // namespace oomguard
