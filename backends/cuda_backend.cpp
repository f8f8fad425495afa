// The cuda backend: PyTorch's caching allocator on one GPU (0, or a real rank's own: Limits::device),
// capped, with its requests fed to the cuda account's ledger (Note [The cuda ledger],
// allocators/cuda/cuda_ledger.h). Without OOMGUARD_WITH_CUDA the driver is compiled in name only: it
// says why it is unavailable.
#include <algorithm>

#include "backends/backend.h"
#include "base/check.h"

#ifdef OOMGUARD_WITH_CUDA
#include <c10/util/Exception.h>

#include "allocators/cuda/cuda_cap.h"
#include "allocators/cuda/cuda_history.h"
#include "allocators/cuda/cuda_ledger.h"
#include "allocators/cuda/cuda_warm_up.h"
#include "allocators/cuda/fault_injecting_cuda_allocator.h"
#include "allocators/cuda/libtorch_cuda.h"
#include "backends/cuda_transfer_timer.h"
#endif

namespace oomguard {
namespace {

#ifdef OOMGUARD_WITH_CUDA

class CudaSession : public BackendSession {
 public:
  // Caps the caching allocator at limits.cap_bytes (the whole device when the cap is larger), attaches
  // the ledger feed and empties the cache and its statistics, after taking the CUDA libraries'
  // workspaces outside the ledger (Note [Library workspaces on cuda]).
  // On GPU limits.device, made the process's current device (a real rank's, Note [Ranks need a GPU
  // each], run/rank_children.h), so that what the run does without naming a device happens there.
  explicit CudaSession(const Limits& limits)
      : BackendSession(Backend::kCuda, c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(limits.device)),
                       CudaAccount()),
        gpu_(limits.device) {
    std::string why;
    TORCH_CHECK(LoadLibTorchCuda(&why), why);                              // Note [LibTorch's CUDA library on demand]
    if (limits.faults) InstallFaultInjectingCudaAllocator(CudaAccount());  // before ApplyCudaCap initialises CUDA
    // The workspaces are taken uncapped, so that a tiny cap fails in the scenario, where it is reported,
    // not here; they then count against the cap like any reserved segment, as on the real card.
    ApplyCudaCap(Ledger::kUnlimited, gpu_);
    SetCurrentCudaDevice(gpu_);
    AttachCudaLedgerFeed(CudaAccount());
    if (traits().has_library_workspaces) {
      CudaLedgerFeedPause pause;  // Note [Library workspaces on cuda]
      WarmUpCudaLibraries(gpu_);
    }
    ApplyCudaCap(limits.cap_bytes, gpu_);
    ResetCudaAllocator(gpu_);
  }

  void BeginMeasurement() override {
    at_start_ = ReadCudaStats(gpu_);
    phases_ = std::make_unique<CudaPhasePeaks>(account().ledger(), gpu_);
    transfers_ = std::make_unique<CudaTransferTimer>();
  }

  // The allocator's peaks (overall and by phase), retries, OOMs, what it held at the start and the
  // host-to-device copies' GPU time.
  void Collect(VariantMeasurement* m) override {
    if (!phases_) return;
    CudaMeasurement c;
    for (const CudaPhasePeak& p : phases_->Finish()) {
      c.phases.push_back({p.phase, p.allocated_bytes, p.reserved_bytes, p.active_bytes, p.requested_bytes});
      // Peaks restart at every phase change, so the overall ones are the largest phase's.
      c.allocated_peak_bytes = std::max(c.allocated_peak_bytes, p.allocated_bytes);
      c.reserved_peak_bytes = std::max(c.reserved_peak_bytes, p.reserved_bytes);
      c.active_peak_bytes = std::max(c.active_peak_bytes, p.active_bytes);
      c.requested_peak_bytes = std::max(c.requested_peak_bytes, p.requested_bytes);
    }
    const CudaStats totals = ReadCudaStats(gpu_);
    c.alloc_retries = totals.alloc_retries;
    c.ooms = totals.ooms;
    c.allocated_at_start_bytes = at_start_.allocated_current_bytes;
    c.reserved_at_start_bytes = at_start_.reserved_current_bytes;
    c.timed_transfers = transfers_->copies();
    c.transfer_ms = transfers_->TotalMilliseconds();
    transfers_.reset();
    m->cuda = std::move(c);
  }

  bool StartOwnHistory(size_t max_events) override {
    StartCudaMemoryHistory(max_events);
    return true;
  }
  void StopOwnHistory() override { StopCudaMemoryHistory(); }
  std::string OwnHistoryPickle() const override { return CudaMemorySnapshotPickle(); }

 private:
  int gpu_;
  std::unique_ptr<CudaPhasePeaks> phases_;  // from BeginMeasurement on
  std::unique_ptr<CudaTransferTimer> transfers_;
  CudaStats at_start_;
};

class CudaDriver : public BackendDriver {
 public:
  Backend backend() const override { return Backend::kCuda; }
  // Loads LibTorch's CUDA library when a GPU is visible (Note [LibTorch's CUDA library on demand],
  // allocators/cuda/libtorch_cuda.h): the runner asks before any variant runs; a fresh cuda child
  // loads it as its session opens, its first step.
  bool Available(std::string* why) const override {
    if (CudaDeviceCount() == 0) {
      *why = "no GPU visible (the cuda backend needs one; try --backend cpu or meta)";
      return false;
    }
    return LoadLibTorchCuda(why);
  }
  std::string Status() const override {
    const int gpus = CudaDeviceCount();
    return gpus > 0 ? std::to_string(gpus) + " GPU(s) visible"
                    : "compiled in; no GPU visible (driver: " + CudaDriverVersion() + ")";
  }
  c10::Device device() const override { return c10::Device(c10::kCUDA, 0); }
  int DeviceCount() const override { return CudaDeviceCount(); }
  DeviceAccount& account() const override { return CudaAccount(); }
  std::unique_ptr<BackendSession> Open(const Limits& limits) const override {
    return std::make_unique<CudaSession>(limits);
  }
};

#else

class CudaDriver : public BackendDriver {
 public:
  Backend backend() const override { return Backend::kCuda; }
  bool Available(std::string* why) const override {
    *why = "this build has no cuda backend (configure with -DOOMGUARD_WITH_CUDA=ON)";
    return false;
  }
  bool compiled_in() const override { return false; }
  int DeviceCount() const override { return 0; }
  std::string Status() const override { return "not compiled in (OOMGUARD_WITH_CUDA=OFF)"; }
  c10::Device device() const override { return c10::Device(c10::kCUDA, 0); }
  DeviceAccount& account() const override {
    OOMGUARD_CHECK(false) << "backend cuda is not available in this build";
    __builtin_unreachable();
  }
  std::unique_ptr<BackendSession> Open(const Limits&) const override {
    OOMGUARD_CHECK(false) << "backend cuda is not available in this build";
    return nullptr;
  }
};

#endif

}  // namespace

const BackendDriver& CudaBackendDriver() {
  static const CudaDriver driver;
  return driver;
}

}  // namespace oomguard
