// What a backend needs around one variant: its device, the account that books its bytes, and (on
// cuda) the caching allocator's statistics, phase by phase.
//
//   std::string why;
//   if (!oomguard::BackendAvailable("cuda", &why)) { ... UNSUPPORTED, because `why` ... }
//   oomguard::BackendSession backend("cuda", limits);  // cap set, cache emptied
//   backend.account().ledger().ResetStatistics();
//   backend.BeginMeasurement();                        // cuda: phases followed from here
//   ... run on backend.device(), measure with backend.account().ledger() ...
//   backend.Collect(&measurement);                      // cuda: the allocator's peaks by phase
#pragma once

#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "allocators/device_account.h"
#include "model/measurement.h"

namespace oomguard {

// cpu and meta always; cuda when this build has it (OOMGUARD_WITH_CUDA) and a GPU is visible.
bool BackendAvailable(const std::string& backend, std::string* why);

// `--backend auto`: cuda when it is available, else cpu. Other names come back unchanged.
std::string ResolveBackend(const std::string& requested);

class BackendSession {
 public:
  // meta: registers oomguard's Meta kernels. cuda: initialises CUDA, caps the caching allocator at
  // limits.cap_bytes (the whole device when the cap is larger), attaches the ledger feed and empties
  // the cache and its statistics (Note [The cuda ledger], allocators/cuda/cuda_ledger.h), after taking
  // the CUDA libraries' workspaces outside the ledger (Note [Library workspaces on cuda]).
  BackendSession(const std::string& backend, const Limits& limits);
  ~BackendSession();
  BackendSession(const BackendSession&) = delete;
  BackendSession& operator=(const BackendSession&) = delete;

  // Call after the ledger's statistics were reset for the variant: cuda follows its phases from here.
  void BeginMeasurement();

  const c10::Device& device() const { return device_; }
  DeviceAccount& account() const { return *account_; }

  // cuda: the allocator's peaks (overall and by phase), retries, OOMs, what it held at the start and the
  // host-to-device copies' GPU time into m->cuda; call once, after the run. Nothing on cpu and meta.
  void Collect(VariantMeasurement* m);

 private:
  struct CudaState;
  c10::Device device_;
  DeviceAccount* account_;
  std::unique_ptr<CudaState> cuda_;  // cuda only
};

}  // namespace oomguard
