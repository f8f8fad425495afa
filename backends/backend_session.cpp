#include "backends/backend_session.h"

#include <algorithm>

#include "allocators/install.h"
#include "backends/meta_kernels.h"

#ifdef OOMGUARD_WITH_CUDA
#include "allocators/cuda/cuda_cap.h"
#include "allocators/cuda/cuda_ledger.h"
#include "allocators/cuda/cuda_warm_up.h"
#include "allocators/cuda/fault_injecting_cuda_allocator.h"
#include "backends/cuda_transfer_timer.h"
#endif

namespace oomguard {

#ifdef OOMGUARD_WITH_CUDA
struct BackendSession::CudaState {
  std::unique_ptr<CudaPhasePeaks> phases;  // from BeginMeasurement on
  std::unique_ptr<CudaTransferTimer> transfers;
  CudaStats at_start;
};
#else
struct BackendSession::CudaState {};
#endif

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

std::string ResolveBackend(const std::string& requested) {
  if (requested != "auto") return requested;
  std::string ignored;
  return BackendAvailable("cuda", &ignored) ? "cuda" : "cpu";
}

BackendSession::BackendSession(const std::string& backend, const Limits& limits)
    : device_(c10::kCPU), account_(&CpuAccount()) {
  if (backend == "meta") {
    RegisterMetaKernels();
    device_ = c10::Device(c10::kMeta);
    account_ = &MetaAccount();
    return;
  }
#ifdef OOMGUARD_WITH_CUDA
  if (backend == "cuda") {
    if (limits.faults) InstallFaultInjectingCudaAllocator(CudaAccount());  // before ApplyCudaCap initialises CUDA
    // The workspaces are taken uncapped, so that a tiny cap fails in the scenario, where it is reported,
    // not here; they then count against the cap like any reserved segment, as on the real card.
    ApplyCudaCap(Ledger::kUnlimited, 0);
    AttachCudaLedgerFeed(CudaAccount());
    {
      CudaLedgerFeedPause pause;  // Note [Library workspaces on cuda]
      WarmUpCudaLibraries(0);
    }
    ApplyCudaCap(limits.cap_bytes, 0);
    ResetCudaAllocator(0);
    device_ = c10::Device(c10::kCUDA, 0);
    account_ = &CudaAccount();
    cuda_ = std::make_unique<CudaState>();
    return;
  }
#endif
  TORCH_CHECK(backend == "cpu", "oomguard: backend ", backend, " is not available in this build");
}

BackendSession::~BackendSession() = default;

void BackendSession::BeginMeasurement() {
#ifdef OOMGUARD_WITH_CUDA
  if (!cuda_) return;
  cuda_->at_start = ReadCudaStats(0);
  cuda_->phases = std::make_unique<CudaPhasePeaks>(account_->ledger(), 0);
  cuda_->transfers = std::make_unique<CudaTransferTimer>();
#endif
}

void BackendSession::Collect(VariantMeasurement* m) {
#ifdef OOMGUARD_WITH_CUDA
  if (!cuda_ || !cuda_->phases) return;
  CudaMeasurement c;
  for (const CudaPhasePeak& p : cuda_->phases->Finish()) {
    c.phases.push_back({p.phase, p.allocated_bytes, p.reserved_bytes, p.active_bytes, p.requested_bytes});
    // Peaks restart at every phase change, so the overall ones are the largest phase's.
    c.allocated_peak_bytes = std::max(c.allocated_peak_bytes, p.allocated_bytes);
    c.reserved_peak_bytes = std::max(c.reserved_peak_bytes, p.reserved_bytes);
    c.active_peak_bytes = std::max(c.active_peak_bytes, p.active_bytes);
    c.requested_peak_bytes = std::max(c.requested_peak_bytes, p.requested_bytes);
  }
  const CudaStats totals = ReadCudaStats(0);
  c.alloc_retries = totals.alloc_retries;
  c.ooms = totals.ooms;
  c.allocated_at_start_bytes = cuda_->at_start.allocated_current_bytes;
  c.reserved_at_start_bytes = cuda_->at_start.reserved_current_bytes;
  c.timed_transfers = cuda_->transfers->copies();
  c.transfer_ms = cuda_->transfers->TotalMilliseconds();
  cuda_->transfers.reset();
  m->cuda = std::move(c);
#else
  (void)m;
#endif
}

}  // namespace oomguard
