// One results file (`oomguard run --json FILE`) reduced to what `oomguard compare` needs, and the
// allocator columns a cuda or --model-cuda run adds beside its ledger column.
//
//   ComparedRun run;
//   if (!LoadComparedRun("cuda.json", &run, &error)) { ... error names the file ... }
//
// Error policy: bad input returns false with a message naming the file; nothing throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace oomguard {

// One results file, reduced to what compare needs.
struct ComparedRun {
  std::string label;  // the backend, or "backend (file)" when two files share one
  std::string backend;
  bool judged = true;           // false: shown for reading (a cuda run's reserved peak), never held to the tolerance
  bool predicts_cuda = false;   // a --model-cuda column: already rounded as the GPU rounds
  bool cuda_allocated = false;  // a cuda run's allocated column: its entries carry the requested peak
  struct Entry {
    std::string scenario, variant;
    std::optional<int64_t> peak_bytes = {};           // absent: no measurement
    std::optional<int64_t> cuda_allocated_peak = {};  // cuda runs: the caching allocator's peaks
    std::optional<int64_t> cuda_reserved_peak = {};
    std::optional<int64_t> cuda_requested_peak = {};
    int64_t cuda_allocated_at_start = 0;  // held before the variant began (library workspaces)
    int64_t cuda_reserved_at_start = 0;
    std::optional<int64_t> model_allocated_peak = {};  // --model-cuda runs: the predicted peaks
    std::optional<int64_t> model_reserved_peak = {};
    // Card mode (meta, --kernels cuda): the cuBLAS workspaces the model held from the start, which its
    // peaks include (Note [cuBLAS workspaces held from the start]).
    int64_t model_allocated_at_start = 0;
    int64_t model_reserved_at_start = 0;
  };
  std::vector<Entry> entries;
};

// Parses a results file; false with a message naming the file and what is wrong.
[[nodiscard]] bool LoadComparedRun(const std::string& path, ComparedRun* out, std::string* error);

// The reference's index: a backend name, or a 1-based position; -1 when neither matches. Empty: the last.
int ReferenceIndex(const std::string& reference, const std::vector<ComparedRun>& runs);

// A cuda run's allocator peaks as two more columns after it: "cuda allocated", "cuda reserved", net of
// what the allocator held before the variant began; a --model-cuda run's predictions likewise. The
// allocated column's entries carry the requested peak (net too), which itemises its differences.
// Returns the new index of the column at `reference` (its allocated column when it has one).
size_t AddAllocatorColumns(std::vector<ComparedRun>* runs, size_t reference);

}  // namespace oomguard
