#include "allocators/cuda/cuda_history.h"

#include <torch/csrc/cuda/memory_snapshot.h>

#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "allocators/cuda/libtorch_cuda.h"
#include "base/check.h"

namespace oomguard {
namespace {

// Both live in libtorch_cuda.so, which the tool loads on demand (Note [LibTorch's CUDA library on
// demand], libtorch_cuda.h): looked up by name, not linked. The static_asserts hold the types to the
// header's declarations (an unevaluated cast references nothing), the names to the pinned build's
// symbols (LibTorchCudaOnDemand.LoadsWithItsKernelsItsHooksAndTheSymbolsOomguardCalls).
using RecordHistory = void (*)(std::optional<std::string>, std::optional<std::string>, const std::string&, size_t, bool,
                               bool, bool, const std::vector<std::string>&);
using SnapshotPickled = std::string (*)();
static_assert(
    std::is_same_v<decltype(static_cast<RecordHistory>(&torch::cuda::_record_memory_history)), RecordHistory>);
static_assert(
    std::is_same_v<decltype(static_cast<SnapshotPickled>(&torch::cuda::_memory_snapshot_pickled)), SnapshotPickled>);

template <typename Fn>
Fn Symbol(const char* name) {
  void* symbol = LibTorchCudaSymbol(name);
  OOMGUARD_CHECK(symbol != nullptr) << "libtorch_cuda.so has no " << name;
  return reinterpret_cast<Fn>(symbol);
}

RecordHistory RecordHistoryFunction() { return Symbol<RecordHistory>(kRecordMemoryHistorySymbol); }

}  // namespace

// Note [The string overload]: _record_memory_history has a bool overload and a string one; a string
// literal converts to bool by a standard conversion and to std::optional<std::string> only by a
// user-defined one, so "all" would pick the bool overload. Hence the explicit optionals.
void StartCudaMemoryHistory(size_t max_entries) {
  RecordHistoryFunction()(std::optional<std::string>("all"), std::optional<std::string>("all"), "all", max_entries,
                          /*clearHistory=*/true, /*compileContext=*/false, /*globalRecordAllocations=*/false, {});
}

void StopCudaMemoryHistory() {
  RecordHistoryFunction()(std::optional<std::string>(), std::optional<std::string>(), "all", SIZE_MAX,
                          /*clearHistory=*/false, /*compileContext=*/false, /*globalRecordAllocations=*/false, {});
}

std::string CudaMemorySnapshotPickle() { return Symbol<SnapshotPickled>(kMemorySnapshotPickledSymbol)(); }

}  // namespace oomguard
