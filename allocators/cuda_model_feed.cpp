#include "allocators/cuda_model_feed.h"

#include "allocators/device_account.h"

#include <utility>

namespace oomguard {

namespace {

// The block Admit made on this thread, waiting for its tensor's address. `feed` null: none waits.
struct Admitted {
  const CudaModelFeed* feed = nullptr;
  std::optional<uint64_t> block;  // nullopt: the model refused it (kPredicts)
};
thread_local Admitted t_admitted;

}  // namespace

CudaModelFeed::CudaModelFeed(int64_t cap_bytes, CachingAllocatorConfig config, ModelRole role)
    : role_(role), model_(cap_bytes, std::move(config)) {}

bool CudaModelFeed::Admit(int64_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<uint64_t> block = model_.Allocate(nbytes);
  if (!block && role_ == ModelRole::kDecides) return false;
  t_admitted = {this, block};
  return true;
}

void CudaModelFeed::Abandon() {
  if (t_admitted.feed != this) return;
  const std::optional<uint64_t> block = std::exchange(t_admitted, {}).block;
  std::lock_guard<std::mutex> lock(mutex_);
  if (block) (void)model_.Free(*block);  // handed out by Allocate just now: always known
}

void CudaModelFeed::OnAlloc(uint64_t address, int64_t nbytes) {
  if (t_admitted.feed == this) {
    const std::optional<uint64_t> block = std::exchange(t_admitted, {}).block;
    std::lock_guard<std::mutex> lock(mutex_);
    if (block) blocks_[address] = *block;
    return;
  }
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

void CudaModelFeed::HoldFromStart(int64_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Uncapped, as the cuda backend takes them before its cap: a cap below them fails the scenario's
  // first request that needs a segment, where it is reported. Kept: bound to no address, never freed.
  (void)model_.AllocateUncapped(nbytes);
  at_start_ = {model_.stats().allocated_bytes.current, model_.stats().reserved_bytes.current};
}

CudaModelFeed::AtStart CudaModelFeed::at_start() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return at_start_;
}

CachingAllocatorModelStats CudaModelFeed::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return model_.stats();
}

std::optional<ModelRefusal> CudaModelFeed::last_refusal() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return model_.last_refusal();
}

ScopedModelFeed::ScopedModelFeed(DeviceAccount& account, CudaModelFeed* feed) : account_(account) {
  account_.SetModelFeed(feed);
}

ScopedModelFeed::~ScopedModelFeed() { account_.SetModelFeed(nullptr); }

}  // namespace oomguard
