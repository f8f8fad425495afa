// Process-wide installation of oomguard's tracking allocators, and the accounts they charge; and the
// cap on oneDNN's instruction set that makes cpu's byte counts the same on every machine.
//
//   int main(int argc, char** argv) {
//     oomguard::InstallTrackingAllocators();   // first line: before any tensor exists
//     ...
//   }
//
// Note [Install before the first tensor]: each c10 storage keeps the allocator it was created with,
// and mkldnn frees its buffers through whatever allocator is registered *now*. A tensor made before
// installation would be freed through the wrong deleter or grow outside the ledger. Installation
// uses priority 100, so no later static registration at c10's default priority 0 can displace it.
#pragma once

#include <string>

#include "allocators/device_account.h"

namespace oomguard {

// Registers the cpu and meta tracking allocators with c10, and caps oneDNN's ISA (CapOneDnnIsa).
// Idempotent; thread-safe.
void InstallTrackingAllocators();

// Note [One oneDNN ISA on every machine]: which kernel cpu runs for a bf16 or fp16 matmul, and the
// blocked layouts and scratchpads of a oneDNN convolution, follow the CPU's instruction set: on an
// AVX-512 machine a bf16 linear goes through oneDNN (ideep::has_bf16_type_support), which allocates
// reordered weights an AVX2 machine never does; with AVX-512 FP16 or AMX the fp16 ones do too. The
// same scenario would then give other bytes on another CI runner, and meta (which mirrors one choice)
// would disagree with cpu. So oomguard caps oneDNN at AVX2, the level every x86-64 runner of the last
// decade has, by setting ONEDNN_MAX_CPU_ISA=AVX2 before oneDNN first runs (it reads it once). A user's
// own ONEDNN_MAX_CPU_ISA or DNNL_MAX_CPU_ISA is left as it is (then bytes may differ by machine).
// Called by InstallTrackingAllocators, which every entry point calls first; calling it after oneDNN
// has run changes nothing.
void CapOneDnnIsa();

// The ISA cap in effect for this process: "AVX2", or the user's value of either variable.
std::string OneDnnIsaCap();

// Whether the tracking allocators are the ones c10 hands out now.
bool TrackingAllocatorsInstalled();

DeviceAccount& CpuAccount();
DeviceAccount& MetaAccount();

}  // namespace oomguard
