// `oomguard compare RESULTS...`: the same scenarios measured on several backends (or runs), side by
// side, each peak against a reference run's, flagging differences past a tolerance.
//
//   oomguard run --backend cpu --json cpu.json && oomguard run --backend meta --json meta.json
//   oomguard compare cpu.json meta.json              # meta is the reference: the last file
//   oomguard compare cpu.json meta.json cuda.json    # the GPU check's fidelity table
//
// The allocator columns are net of what it held before the variant began (the CUDA libraries'
// workspaces, Note [Library workspaces on cuda]): the scenario's own bytes. A row past the tolerance
// against a cuda allocated peak is itemised: rounding (allocated - requested peak) and what the kernels
// asked for (cuda requested peak - the other run's peak).
// A run made with --model-cuda adds two columns too, "cpu model allocated" (held to the tolerance:
// it predicts the cuda allocated peak) and "cpu model reserved" (shown beside cuda reserved).
// Rows are the variants of the first file, in order; a variant missing from a file, or without a
// measurement there, shows "-". A cuda run adds two columns, its allocator's allocated and reserved
// peaks, and when it is the reference the others are measured against its allocated peak (the
// bytes its tensors held, rounded as the GPU rounds them). Exit codes (cli.h): 0 every compared peak within the
// tolerance; 1 some differ past it (each such row is marked); 2 a file that does not load as oomguard results.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace oomguard {

struct CompareOptions {
  std::vector<std::string> files;  // results JSON files (`oomguard run --json`), at least two
  std::string reference = {};      // a file's backend or its position from 1; empty: the last file
  double tolerance_percent = 2.0;  // a peak this close to the reference's (relatively) agrees
  std::string markdown_path = {};  // --md FILE: the same table in Markdown
};

int CompareCommand(const CompareOptions& options, std::ostream& out, std::ostream& err);

}  // namespace oomguard
