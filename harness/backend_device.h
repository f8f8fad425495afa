// What a backend needs before and after a variant runs: its device, the account that books its
// bytes, and (on cuda) the caching allocator's statistics.
//
//   std::string why;
//   if (!oomguard::BackendAvailable("cuda", &why)) { ... UNSUPPORTED, because `why` ... }
//   oomguard::BackendDevice d = oomguard::PrepareBackend("cuda", limits);  // cap set, cache emptied
//   ... run on d.device, measure with d.account->ledger() ...
//   oomguard::CollectBackendStats("cuda", &measurement);
#pragma once

#include <string>

#include <c10/core/Device.h>

#include "allocators/device_account.h"
#include "harness/measurement.h"

namespace oomguard {

struct BackendDevice {
  c10::Device device;
  DeviceAccount* account;
};

// cpu and meta always; cuda when this build has it (OOMGUARD_WITH_CUDA) and a GPU is visible.
bool BackendAvailable(const std::string& backend, std::string* why);

// meta: registers oomguard's Meta kernels. cuda: initialises CUDA, caps the caching allocator at
// limits.cap_bytes (the whole device when the cap is larger), attaches the ledger feed and empties the
// cache and its statistics (Note [The cuda ledger], allocators/cuda/cuda_ledger.h).
BackendDevice PrepareBackend(const std::string& backend, const Limits& limits);

// cuda: the allocator's peaks, retries and OOMs into m->cuda. Nothing on cpu and meta.
void CollectBackendStats(const std::string& backend, VariantMeasurement* m);

}  // namespace oomguard
