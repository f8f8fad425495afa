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
// bytes its tensors held, rounded as the GPU rounds them). Exit codes (cli.h): 0 every compared peak within the tolerance;
// 1 some differ past it (each such row is marked); 2 a file that does not load as oomguard results.
#pragma once

#include <cstdint>
#include <optional>
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

// One results file, reduced to what compare needs.
struct ComparedRun {
  std::string label;  // the backend, or "backend (file)" when two files share one
  std::string backend;
  bool judged = true;  // false: shown for reading (a cuda run's reserved peak), never held to the tolerance
  bool predicts_cuda = false;  // a --model-cuda column: already rounded as the GPU rounds
  bool cuda_allocated = false;  // a cuda run's allocated column: its entries carry the requested peak
  struct Entry {
    std::string scenario, variant;
    std::optional<int64_t> peak_bytes = {};           // absent: no measurement
    std::optional<int64_t> cuda_allocated_peak = {};  // cuda runs: the caching allocator's peaks
    std::optional<int64_t> cuda_reserved_peak = {};
    std::optional<int64_t> cuda_requested_peak = {};
    int64_t cuda_allocated_at_start = 0;          // held before the variant began (library workspaces)
    int64_t cuda_reserved_at_start = 0;
    std::optional<int64_t> model_allocated_peak = {};  // --model-cuda runs: the predicted peaks
    std::optional<int64_t> model_reserved_peak = {};
  };
  std::vector<Entry> entries;
};

// Parses a results file; false with a message naming the file and what is wrong.
bool LoadComparedRun(const std::string& path, ComparedRun* out, std::string* error);

int CompareCommand(const CompareOptions& options, std::ostream& out, std::ostream& err);

}  // namespace oomguard
