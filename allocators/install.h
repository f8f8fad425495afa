// Process-wide installation of oomguard's tracking allocators, and the accounts they charge.
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

#include "allocators/device_account.h"

namespace oomguard {

// Registers the cpu and meta tracking allocators with c10. Idempotent; thread-safe.
void InstallTrackingAllocators();

// Whether the tracking allocators are the ones c10 hands out now.
bool TrackingAllocatorsInstalled();

DeviceAccount& CpuAccount();
DeviceAccount& MetaAccount();

}  // namespace oomguard
