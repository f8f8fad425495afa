#include "allocators/cuda/cuda_ledger.h"

#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

namespace oomguard {
namespace {

namespace cca = c10::cuda::CUDACachingAllocator;
using c10::CachingDeviceAllocator::TraceEntry;

constexpr size_t kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

// Which phase allocated each live block, for Release (Note [Live bytes by origin], ledger.h).
struct Origins {
  std::mutex mutex;
  std::unordered_map<size_t, int> by_address;
};

std::atomic<bool> g_feed_paused{false};

}  // namespace

DeviceAccount& CudaAccount() {
  static auto* account = new DeviceAccount("cuda");
  return *account;
}

void AttachCudaLedgerFeed(DeviceAccount& account) {
  static std::once_flag once;
  std::call_once(once, [&account] {
    auto* origins = new Origins();  // lives as long as the allocator keeps the tracker: the process
    cca::attachAllocatorTraceTracker([&account, origins](const TraceEntry& e) {
      const auto bytes = static_cast<int64_t>(e.size_);
      if (e.action_ == TraceEntry::ALLOC) {
        if (g_feed_paused.load(std::memory_order_relaxed)) return;
        int origin = Ledger::kNoOrigin;
        (void)account.ledger().TryCharge(bytes, Ledger::kUnlimited, &origin);  // the cap is the allocator's
        std::lock_guard<std::mutex> lock(origins->mutex);
        origins->by_address[e.addr_] = origin;
      } else if (e.action_ == TraceEntry::FREE_REQUESTED) {
        int origin = Ledger::kNoOrigin;
        {
          std::lock_guard<std::mutex> lock(origins->mutex);
          auto it = origins->by_address.find(e.addr_);
          if (it == origins->by_address.end()) return;  // never charged: allocated before the feed or paused
          origin = it->second;
          origins->by_address.erase(it);
        }
        account.ledger().Release(bytes, origin);
      } else if (e.action_ == TraceEntry::OOM) {
        account.RecordRefusal(bytes);
      }
    });
  });
}

CudaLedgerFeedPause::CudaLedgerFeedPause() { g_feed_paused.store(true); }
CudaLedgerFeedPause::~CudaLedgerFeedPause() { g_feed_paused.store(false); }

void ResetCudaAllocator(int device) {
  cca::emptyCache();
  cca::resetPeakStats(static_cast<c10::DeviceIndex>(device));
  cca::resetAccumulatedStats(static_cast<c10::DeviceIndex>(device));
}

CudaStats ReadCudaStats(int device) {
  const c10::CachingDeviceAllocator::DeviceStats s = cca::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  CudaStats out;
  out.allocated_peak_bytes = s.allocated_bytes[kAggregate].peak;
  out.reserved_peak_bytes = s.reserved_bytes[kAggregate].peak;
  out.active_peak_bytes = s.active_bytes[kAggregate].peak;
  out.requested_peak_bytes = s.requested_bytes[kAggregate].peak;
  out.alloc_retries = s.num_alloc_retries;
  out.ooms = s.num_ooms;
  out.allocated_current_bytes = s.allocated_bytes[kAggregate].current;
  out.reserved_current_bytes = s.reserved_bytes[kAggregate].current;
  return out;
}

CudaPhasePeaks::CudaPhasePeaks(Ledger& ledger, int device) : ledger_(ledger), device_(device) {
  cca::resetPeakStats(static_cast<c10::DeviceIndex>(device_));
  ledger_.SetPhaseListener([this](const std::string& ending, const std::string&) { Close(ending); });
}

CudaPhasePeaks::~CudaPhasePeaks() { ledger_.SetPhaseListener({}); }

void CudaPhasePeaks::Close(const std::string& phase) {
  const CudaStats s = ReadCudaStats(device_);
  auto it = std::find_if(phases_.begin(), phases_.end(), [&](const CudaPhasePeak& p) { return p.phase == phase; });
  if (it == phases_.end()) it = phases_.insert(phases_.end(), CudaPhasePeak{phase});
  it->allocated_bytes = std::max(it->allocated_bytes, s.allocated_peak_bytes);
  it->reserved_bytes = std::max(it->reserved_bytes, s.reserved_peak_bytes);
  it->active_bytes = std::max(it->active_bytes, s.active_peak_bytes);
  it->requested_bytes = std::max(it->requested_bytes, s.requested_peak_bytes);
  cca::resetPeakStats(static_cast<c10::DeviceIndex>(device_));
}

std::vector<CudaPhasePeak> CudaPhasePeaks::Finish() {
  Close(ledger_.phase());
  return phases_;
}

}  // namespace oomguard
