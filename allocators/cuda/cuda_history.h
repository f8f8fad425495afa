// PyTorch's own allocation history on the cuda backend: what torch.cuda.memory._record_memory_history
// and _dump_snapshot do in Python, from C++ (torch/csrc/cuda/memory_snapshot.h, in libtorch_cuda,
// looked up by name: allocators/cuda/libtorch_cuda.h).
//
//   oomguard::StartCudaMemoryHistory(100000);       // before the variant
//   ... run on the GPU ...
//   std::string pickle = oomguard::CudaMemorySnapshotPickle();  // the file memory_viz opens
//   oomguard::StopCudaMemoryHistory();
//
// Needs a GPU (CudaDeviceCount() > 0): recording initialises CUDA. The frames are PyTorch's C++
// stacks ("stacks=all" records Python and C++; a C++ program has only the latter).
#pragma once

#include <cstddef>
#include <string>

namespace oomguard {

// Records every allocator event from now on, keeping the most recent max_entries, each with the
// C++ stack that caused it; clears what an earlier recording kept.
void StartCudaMemoryHistory(size_t max_entries);
void StopCudaMemoryHistory();

// The caching allocator's segments and the recorded trace, pickled as _memory_snapshot_pickled does.
std::string CudaMemorySnapshotPickle();

// The functions above call, by these names in libtorch_cuda.so (allocators/cuda/libtorch_cuda.h):
// torch::cuda::_record_memory_history (its string overload) and _memory_snapshot_pickled.
inline constexpr const char* kRecordMemoryHistorySymbol =
    "_ZN5torch4cuda22_record_memory_historyESt8optionalINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEES8_"
    "RKS7_mbbbRKSt6vectorIS7_SaIS7_EE";
inline constexpr const char* kMemorySnapshotPickledSymbol = "_ZN5torch4cuda24_memory_snapshot_pickledB5cxx11Ev";

}  // namespace oomguard
