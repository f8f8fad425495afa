#include "allocators/cuda/cuda_history.h"

#include <torch/csrc/cuda/memory_snapshot.h>

#include <optional>

namespace oomguard {

// Note [The string overload]: _record_memory_history has a bool overload and a string one; a string
// literal converts to bool by a standard conversion and to std::optional<std::string> only by a
// user-defined one, so "all" would pick the bool overload. Hence the explicit optionals.
void StartCudaMemoryHistory(size_t max_entries) {
  torch::cuda::_record_memory_history(std::optional<std::string>("all"), std::optional<std::string>("all"), "all",
                                      max_entries, /*clearHistory=*/true);
}

void StopCudaMemoryHistory() {
  torch::cuda::_record_memory_history(std::optional<std::string>(), std::optional<std::string>(), "all");
}

std::string CudaMemorySnapshotPickle() { return torch::cuda::_memory_snapshot_pickled(); }

}  // namespace oomguard
