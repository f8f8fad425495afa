#include "allocators/meta_tracking_allocator.h"

#include <cstdint>

#include "allocators/install.h"

namespace oomguard {

MetaTrackingAllocator::MetaTrackingAllocator(DeviceAccount& account) : account_(account) {}

c10::DataPtr MetaTrackingAllocator::allocate(size_t nbytes) {
  const c10::Device meta(c10::DeviceType::Meta);
  if (nbytes == 0) return {nullptr, nullptr, &Delete, meta};
  account_.Charge(static_cast<int64_t>(nbytes));
  // Note [Meta context]: the context is the byte count, not an address.
  return {nullptr, reinterpret_cast<void*>(static_cast<uintptr_t>(nbytes)), &Delete, meta};
}

void MetaTrackingAllocator::Delete(void* context) {
  // The meta allocator is a process-wide singleton, so its account is too (install.h).
  MetaAccount().Refund(static_cast<int64_t>(reinterpret_cast<uintptr_t>(context)));
}

}  // namespace oomguard
