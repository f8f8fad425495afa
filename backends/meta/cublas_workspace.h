// The cuBLAS and cuBLASLt workspaces a card's process holds from the start (Note [cuBLAS workspaces
// held from the start], cublas_workspace.cpp). On meta with a card's kernels (Note [Meta as a card]) a
// measurement takes them in its model of the caching allocator before the scenario runs, outside the
// ledger, as the cuda backend takes the real ones (Note [Library workspaces on cuda]):
//
//   for (int64_t bytes : oomguard::CublasWorkspacesHeldFromStart(oomguard::KernelTarget::Cuda(90)))
//     feed.HoldFromStart(bytes);              // 32 MiB + 1 MiB on an sm_90 card, none on cpu kernels
#pragma once

#include <cstdint>
#include <vector>

#include "backends/meta/kernel_target.h"

namespace oomguard {

// CublasHandlePool.cpp parseChosenWorkspaceSize for a card of `compute_capability`: 32 MiB on sm_90
// (4096 KiB x 8), else 8 MiB + 128 KiB (":4096:2:16:8"); CUBLAS_WORKSPACE_CONFIG (":SIZE:COUNT" pairs,
// KiB) overrides both.
int64_t CublasWorkspaceBytes(int compute_capability);
// getCUDABlasLtWorkspaceSize: CUBLASLT_WORKSPACE_SIZE KiB (default 1024), at most the cuBLAS size.
int64_t CublasLtWorkspaceBytes(int compute_capability);

// The workspaces a process on `target` holds from the start, in the order PyTorch allocates them: the
// cuBLAS one, then cuBLASLt's (unless TORCH_CUBLASLT_UNIFIED_WORKSPACE=1 makes it share the cuBLAS
// one); none when the target is cpu.
std::vector<int64_t> CublasWorkspacesHeldFromStart(const KernelTarget& target);

}  // namespace oomguard
