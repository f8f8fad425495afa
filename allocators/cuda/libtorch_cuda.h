// LibTorch's CUDA library (libtorch_cuda.so: the CUDA kernels, cuBLAS, cuDNN, NCCL), loaded into the
// process when a GPU run needs it rather than at start-up.
//
//   std::string why;
//   if (!oomguard::LoadLibTorchCuda(&why)) { ... the cuda backend is unavailable: `why` ... }
//   auto* f = reinterpret_cast<Fn>(oomguard::LibTorchCudaSymbol("_ZN5torch4cuda..."));
//
// Note [LibTorch's CUDA library on demand]: linked in, libtorch_cuda.so and the NVIDIA libraries it
// needs cost every process about 0.1 s and 235 MiB at start-up on the 2-core machine (relocations and
// its static registrations), where `oomguard --version` takes 0.22 s in all: every cpu and meta run, and
// every CI job on a machine without a GPU, paid it for nothing. So the `oomguard` tool links LibTorch's
// cpu library only (the OOMGUARD_LIBTORCH_CUDA_ON_DEMAND target property, CMakeLists.txt) and the cuda
// backend loads the CUDA one here, before its first tensor; a program that links all of LibTorch (a
// user's, the tests) already has it, and this only looks it up. Its static initialisers register the
// CUDA kernels with the dispatcher and the CUDA hooks ATen asks for, exactly as at start-up; but ATen
// caches its hooks the first time anything asks (at::manual_seed does, at::hasCUDA, torch::cuda::*),
// and a process that asked before the load keeps the stub for good: the load then fails, saying so.
// Nothing initialises CUDA itself here: a loaded library still lets the runner fork.
#pragma once

#include <string>

namespace oomguard {

// Loads libtorch_cuda.so from the folder libtorch_cpu.so was loaded from, once per process (thread
// safe); true once ATen sees its CUDA hooks. False, with why, when the file cannot be loaded or ATen
// asked for its hooks before (see the note). Needs no GPU.
bool LoadLibTorchCuda(std::string* why);

// A symbol of the loaded library by its (mangled) name; nullptr if it has none. Requires
// LoadLibTorchCuda() to have returned true.
void* LibTorchCudaSymbol(const char* name);

}  // namespace oomguard
