#include "allocators/cpu_tracking_allocator.h"

#include <c10/core/impl/alloc_cpu.h>

namespace oomguard {
namespace {

constexpr size_t kHeaderBytes = 64;  // Note [Size header]

struct BlockHeader {
  int64_t nbytes;
  DeviceAccount* account;
};
static_assert(sizeof(BlockHeader) <= kHeaderBytes);

}  // namespace

CpuTrackingAllocator::CpuTrackingAllocator(DeviceAccount& account) : account_(account) {}

c10::DataPtr CpuTrackingAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return {nullptr, nullptr, &Delete, c10::Device(c10::DeviceType::CPU)};
  account_.Charge(static_cast<int64_t>(nbytes));
  void* block = nullptr;
  try {
    block = c10::alloc_cpu(nbytes + kHeaderBytes);
  } catch (...) {
    account_.Refund(static_cast<int64_t>(nbytes));
    throw;
  }
  new (block) BlockHeader{static_cast<int64_t>(nbytes), &account_};
  void* data = static_cast<char*>(block) + kHeaderBytes;
  return {data, data, &Delete, c10::Device(c10::DeviceType::CPU)};
}

void CpuTrackingAllocator::Delete(void* data) {
  if (data == nullptr) return;
  void* block = static_cast<char*>(data) - kHeaderBytes;
  const BlockHeader* header = static_cast<const BlockHeader*>(block);
  header->account->Refund(header->nbytes);
  c10::free_cpu(block);
}

void CpuTrackingAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  default_copy_data(dest, src, count);
}

}  // namespace oomguard
