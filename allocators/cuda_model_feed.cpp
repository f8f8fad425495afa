#include "allocators/cuda_model_feed.h"

#include "allocators/device_account.h"

namespace oomguard {

CudaModelFeed::CudaModelFeed(int64_t cap_bytes) : model_(cap_bytes) {}

void CudaModelFeed::OnAlloc(uint64_t address, int64_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (std::optional<uint64_t> block = model_.Allocate(nbytes)) blocks_[address] = *block;
}

void CudaModelFeed::OnFree(uint64_t address) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(address);
  if (it == blocks_.end()) return;
  (void)model_.Free(it->second);  // handed out by Allocate and freed once: always known
  blocks_.erase(it);
}

CachingAllocatorModelStats CudaModelFeed::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return model_.stats();
}

ScopedModelFeed::ScopedModelFeed(DeviceAccount& account, CudaModelFeed* feed) : account_(account) {
  account_.SetModelFeed(feed);
}

ScopedModelFeed::~ScopedModelFeed() { account_.SetModelFeed(nullptr); }

}  // namespace oomguard
