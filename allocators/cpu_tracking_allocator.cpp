#include "allocators/cpu_tracking_allocator.h"

#include <c10/core/impl/alloc_cpu.h>

namespace oomguard {
namespace {

constexpr size_t kHeaderBytes = 64;  // Note [Size header]

struct BlockHeader {
  int64_t nbytes;
  DeviceAccount* account;  // null: a host allocation, not charged (Note [Host memory on the cpu backend])
  int origin;              // the phase it was allocated in (Note [Live bytes by origin], ledger.h)
};
static_assert(sizeof(BlockHeader) <= kHeaderBytes);

thread_local bool t_host_scope = false;

void DeleteBlock(void* data) {
  if (data == nullptr) return;
  void* block = static_cast<char*>(data) - kHeaderBytes;
  const BlockHeader* header = static_cast<const BlockHeader*>(block);
  if (header->account) {
    header->account->TraceFree(reinterpret_cast<uint64_t>(data), header->nbytes);
    header->account->Refund(header->nbytes, header->origin);
  }
  c10::free_cpu(block);
}

}  // namespace

HostAllocationScope::HostAllocationScope() : previous_(t_host_scope) { t_host_scope = true; }
HostAllocationScope::~HostAllocationScope() { t_host_scope = previous_; }

bool IsHostAllocation(const c10::DataPtr& data) {
  if (data.get() == nullptr || data.get_deleter() != &DeleteBlock) return false;
  const auto* header = reinterpret_cast<const BlockHeader*>(static_cast<const char*>(data.get()) - kHeaderBytes);
  return header->account == nullptr;
}

CpuTrackingAllocator::CpuTrackingAllocator(DeviceAccount& account) : account_(account) {}

c10::DataPtr CpuTrackingAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return {nullptr, nullptr, &DeleteBlock, c10::Device(c10::DeviceType::CPU)};
  DeviceAccount* account = t_host_scope ? nullptr : &account_;
  const int origin = account ? account->Charge(static_cast<int64_t>(nbytes)) : Ledger::kNoOrigin;
  void* block = nullptr;
  try {
    block = c10::alloc_cpu(nbytes + kHeaderBytes);
  } catch (...) {
    if (account) account->Refund(static_cast<int64_t>(nbytes), origin);
    throw;
  }
  new (block) BlockHeader{static_cast<int64_t>(nbytes), account, origin};
  void* data = static_cast<char*>(block) + kHeaderBytes;
  if (account) account->TraceAlloc(reinterpret_cast<uint64_t>(data), static_cast<int64_t>(nbytes));
  return {data, data, &DeleteBlock, c10::Device(c10::DeviceType::CPU)};
}

c10::DeleterFnPtr CpuTrackingAllocator::raw_deleter() const { return &DeleteBlock; }

void CpuTrackingAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  default_copy_data(dest, src, count);
}

}  // namespace oomguard
