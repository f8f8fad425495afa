// The cuBLAS and cuBLASLt workspaces a card's process holds from its first matmul on (Note [cuBLAS
// workspaces held from the start], cublas_workspace.cpp). On meta with a card's kernels (Note [Meta as
// a card]) the first mm, addmm, bmm, baddbmm or addmv allocates them as meta tensors kept until the
// kernel target changes, the meta backend starts a measurement, or ReleaseCublasWorkspaces():
//
//   oomguard::ScopedKernelTarget card(oomguard::KernelTarget::Cuda(90));
//   at::mm(a, b);                             // + 32 MiB: the cuBLAS workspace of an sm_90 card
//   oomguard::ReleaseCublasWorkspaces();      // gone (tests; a new measurement)
#pragma once

#include <cstdint>

namespace oomguard {

// CublasHandlePool.cpp parseChosenWorkspaceSize for a card of `compute_capability`: 32 MiB on sm_90
// (4096 KiB x 8), else 8 MiB + 128 KiB (":4096:2:16:8"); CUBLAS_WORKSPACE_CONFIG (":SIZE:COUNT" pairs,
// KiB) overrides both.
int64_t CublasWorkspaceBytes(int compute_capability);
// getCUDABlasLtWorkspaceSize: CUBLASLT_WORKSPACE_SIZE KiB (default 1024), at most the cuBLAS size.
int64_t CublasLtWorkspaceBytes(int compute_capability);

// What a cuBLAS call (EnsureCublasWorkspace) or a cuBLASLt one (EnsureCublasLtWorkspace, which makes the
// cuBLAS workspace first, as getCurrentCUDABlasLtHandle does) allocates the first time in a card-kernel
// process; nothing when the kernel target is cpu.
void EnsureCublasWorkspace();
void EnsureCublasLtWorkspace();
// Frees both (the next matmul makes them again).
void ReleaseCublasWorkspaces();
// The bytes the held workspaces take (0 when none is held).
int64_t HeldCublasWorkspaceBytes();

}  // namespace oomguard
