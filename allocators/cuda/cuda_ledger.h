// The cuda backend's bookkeeping: PyTorch's own caching allocator does the allocating (under the cap
// of cuda_cap.h), and oomguard reads it two ways.
//
//   oomguard::ApplyCudaCap(cap_bytes, 0);                 // initialises CUDA
//   oomguard::AttachCudaLedgerFeed(oomguard::CudaAccount());
//   oomguard::ResetCudaAllocator(0);                      // before each variant
//   ... run ...
//   oomguard::CudaStats stats = oomguard::ReadCudaStats(0);
//
// Note [The cuda ledger]: an allocator trace tracker (CUDACachingAllocator::attachAllocatorTraceTracker,
// called for every ALLOC and FREE_REQUESTED whether or not history is recorded) charges the account's
// ledger with each request's *requested* bytes and takes them back on free. So the ledger reads what
// the cpu and meta ledgers read, and every ledger metric (phase peaks, live after each iteration,
// timeline, origins at the peak) means the same on cuda. The allocator's own statistics add what only
// a GPU has: allocated bytes (rounded up to 512-byte blocks), reserved bytes (the segments it holds,
// which the cap limits), retries and OOMs. The tracker runs under the allocator's lock: it only touches
// the ledger and a small map, never PyTorch. A free of a block the feed never charged (one allocated
// before it was attached, or while paused) is ignored, so the ledger never goes below what it charged.
//
// Everything here compiles and links without a GPU; the functions need CudaDeviceCount() > 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocators/device_account.h"

namespace oomguard {

// The account the cuda ledger feed charges (no allocator of oomguard's own stands behind it).
DeviceAccount& CudaAccount();

// Attaches the tracker once per process; CUDA must be initialised (ApplyCudaCap does it).
void AttachCudaLedgerFeed(DeviceAccount& account);

// While one exists, the feed ignores new allocations (and so, later, their frees): what the CUDA
// libraries keep for the process (cuda_warm_up.h) stays out of the ledger. Controlling thread only.
class CudaLedgerFeedPause {
 public:
  CudaLedgerFeedPause();
  ~CudaLedgerFeedPause();
  CudaLedgerFeedPause(const CudaLedgerFeedPause&) = delete;
  CudaLedgerFeedPause& operator=(const CudaLedgerFeedPause&) = delete;
};

// Frees the allocator's cached blocks and resets its peak and accumulated statistics, so one variant's
// numbers do not leak into the next.
void ResetCudaAllocator(int device);

struct CudaStats {
  int64_t allocated_peak_bytes = 0;  // blocks handed out, rounded (512 bytes and up)
  int64_t reserved_peak_bytes = 0;   // segments held from the driver: what the cap limits
  int64_t active_peak_bytes = 0;     // allocated plus blocks freed but still in use on a stream
  int64_t requested_peak_bytes = 0;  // what callers asked for
  int64_t alloc_retries = 0;         // allocations that freed the cache and tried again
  int64_t ooms = 0;
  int64_t allocated_current_bytes = 0;  // now, not peaks
  int64_t reserved_current_bytes = 0;
};

CudaStats ReadCudaStats(int device);

// The caching allocator's peaks phase by phase, following a ledger's phases: at each phase change the
// peaks since the previous change go to the phase that ends (the larger, when a phase recurs), and the
// allocator's peaks restart from the bytes held now. So the overall peaks are the largest phase's.
struct CudaPhasePeak {
  std::string phase;
  int64_t allocated_bytes = 0, reserved_bytes = 0, active_bytes = 0, requested_bytes = 0;
};

class CudaPhasePeaks {
 public:
  CudaPhasePeaks(Ledger& ledger, int device);  // listens to the ledger's phases from now on
  ~CudaPhasePeaks();                           // stops listening
  CudaPhasePeaks(const CudaPhasePeaks&) = delete;
  CudaPhasePeaks& operator=(const CudaPhasePeaks&) = delete;

  // Closes the current phase; the phases in order of first entry.
  std::vector<CudaPhasePeak> Finish();

 private:
  void Close(const std::string& phase);

  Ledger& ledger_;
  int device_;
  std::vector<CudaPhasePeak> phases_;
};

}  // namespace oomguard
