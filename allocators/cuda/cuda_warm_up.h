// Allocates what the CUDA libraries keep for the whole process (cuBLAS and cuBLASLt workspaces) before a
// measurement starts, so that a scenario's first matmul does not count them as its own.
//
//   oomguard::ApplyCudaCap(cap, 0);
//   { oomguard::CudaLedgerFeedPause pause; oomguard::WarmUpCudaLibraries(0); }  // cuda_ledger.h
//   ... BeginMeasurement: the allocator's bytes held now are "held at the start" ...
//
// Note [Library workspaces on cuda]: PyTorch takes each cuBLAS handle's workspace (32 MiB on Hopper by
// default, CUBLAS_WORKSPACE_CONFIG) from the caching allocator the first time a handle multiplies on a
// stream, and keeps it until the process ends. The cpu and meta backends have no such buffer. Taken here,
// it shows in the cuda measurement as held_at_start (and in the allocator's raw peaks, which PyTorch
// users know), and the fidelity table compares the scenario's own bytes.
//
// Needs a GPU; compiles and links without one.
#pragma once

namespace oomguard {

// Runs small fp32, bf16 and fp16 matmuls (mm and addmm with a bias, which takes the cuBLASLt path) on
// `device` and waits for them. Idempotent: later calls allocate nothing new.
void WarmUpCudaLibraries(int device);

}  // namespace oomguard
