// CudaModelFeed: drives a CachingAllocatorModel from a cpu or meta device's allocations, so a run
// without a GPU predicts the CUDA caching allocator's statistics (`oomguard run --model-cuda`).
//
//   oomguard::CudaModelFeed feed(limits.cap_bytes);          // the model's cap on reserved bytes
//   {
//     oomguard::ScopedModelFeed attach(oomguard::CpuAccount(), &feed);
//     ... tensors come and go: each allocation and free reaches the model ...
//   }
//   oomguard::CachingAllocatorModelStats s = feed.stats();  // predicted allocated/reserved peaks
//
// The tracking allocators report blocks through DeviceAccount::TraceAlloc/TraceFree
// (device_account.h); with no feed attached that costs one atomic load (acquire) per allocation and
// per free. The ledger's cap still decides which requests succeed: the model only predicts.
//
// Note [Predicted OOMs]: a request the model's cap refuses counts in stats().num_ooms (a real GPU
// with that cap would have raised there) but the tensor lives on for the ledger; its later free is
// ignored. Once the model has refused a request, its later numbers describe a run the GPU would not
// have reached.
//
// Thread safety: OnAlloc/OnFree/stats may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "allocators/caching_allocator_model.h"

namespace oomguard {

class DeviceAccount;

class CudaModelFeed {
 public:
  explicit CudaModelFeed(int64_t cap_bytes = CachingAllocatorModel::kUnlimited);
  CudaModelFeed(const CudaModelFeed&) = delete;
  CudaModelFeed& operator=(const CudaModelFeed&) = delete;

  // A tensor of nbytes now lives at address (an address the allocator may reuse once freed).
  void OnAlloc(uint64_t address, int64_t nbytes);
  // The tensor at address is freed; addresses the feed never saw (allocated before it was attached,
  // or refused by the model) are ignored.
  void OnFree(uint64_t address);
  CachingAllocatorModelStats stats() const;

 private:
  mutable std::mutex mutex_;
  CachingAllocatorModel model_;                    // guarded by mutex_
  std::unordered_map<uint64_t, uint64_t> blocks_;  // guarded by mutex_: tensor address -> model block
};

// Attaches a feed to an account for a scope (the controlling thread's job); detaches on exit.
class ScopedModelFeed {
 public:
  ScopedModelFeed(DeviceAccount& account, CudaModelFeed* feed);
  ~ScopedModelFeed();
  ScopedModelFeed(const ScopedModelFeed&) = delete;
  ScopedModelFeed& operator=(const ScopedModelFeed&) = delete;

 private:
  DeviceAccount& account_;
};

}  // namespace oomguard
