#include "harness/backend_device.h"

#include "allocators/install.h"
#include "harness/meta_kernels.h"

#ifdef OOMGUARD_WITH_CUDA
#include "allocators/cuda/cuda_cap.h"
#include "allocators/cuda/cuda_ledger.h"
#endif

namespace oomguard {

bool BackendAvailable(const std::string& backend, std::string* why) {
  if (backend != "cuda") return true;
#ifdef OOMGUARD_WITH_CUDA
  if (CudaDeviceCount() > 0) return true;
  *why = "no GPU visible (the cuda backend needs one; try --backend cpu or meta)";
#else
  *why = "this build has no cuda backend (configure with -DOOMGUARD_WITH_CUDA=ON)";
#endif
  return false;
}

BackendDevice PrepareBackend(const std::string& backend, const Limits& limits) {
  if (backend == "meta") {
    RegisterMetaKernels();
    return {c10::Device(c10::kMeta), &MetaAccount()};
  }
#ifdef OOMGUARD_WITH_CUDA
  if (backend == "cuda") {
    TORCH_CHECK(!limits.faults, "oomguard: --inject is not supported on the cuda backend yet");
    ApplyCudaCap(limits.cap_bytes, 0);
    AttachCudaLedgerFeed(CudaAccount());
    ResetCudaAllocator(0);
    return {c10::Device(c10::kCUDA, 0), &CudaAccount()};
  }
#endif
  TORCH_CHECK(backend == "cpu", "oomguard: backend ", backend, " is not available in this build");
  return {c10::Device(c10::kCPU), &CpuAccount()};
}

void CollectBackendStats(const std::string& backend, VariantMeasurement* m) {
#ifdef OOMGUARD_WITH_CUDA
  if (backend != "cuda") return;
  const CudaStats s = ReadCudaStats(0);
  m->cuda = CudaMeasurement{s.allocated_peak_bytes, s.reserved_peak_bytes, s.active_peak_bytes,
                            s.requested_peak_bytes, s.alloc_retries,       s.ooms};
#else
  (void)backend;
  (void)m;
#endif
}

}  // namespace oomguard
