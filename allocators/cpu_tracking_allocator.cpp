#include "allocators/cpu_tracking_allocator.h"

#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <string>

namespace oomguard {
namespace {

constexpr size_t kHeaderBytes = 64;  // Note [Size header]

struct BlockHeader {
  int64_t nbytes;
  DeviceAccount* account;
  bool host;   // a host allocation, not in the ledger (Note [Host memory on the cpu backend])
  int origin;  // the phase it was allocated in (Note [Live bytes by origin], ledger.h)
};
static_assert(sizeof(BlockHeader) <= kHeaderBytes);

thread_local bool t_host_scope = false;

void DeleteBlock(void* data) {
  if (data == nullptr) return;
  void* block = static_cast<char*>(data) - kHeaderBytes;
  const BlockHeader* header = static_cast<const BlockHeader*>(block);
  if (header->host) {
    header->account->RefundHost(header->nbytes);
  } else {
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
  return header->host;
}

CpuTrackingAllocator::CpuTrackingAllocator(DeviceAccount& account) : account_(account) {}

c10::DataPtr CpuTrackingAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return {nullptr, nullptr, &DeleteBlock, c10::Device(c10::DeviceType::CPU)};
  const bool host = t_host_scope;
  const auto size = static_cast<int64_t>(nbytes);
  int origin = Ledger::kNoOrigin;
  if (host) {
    account_.ChargeHost(size);  // Note [Host memory is part of the cap]
  } else {
    origin = account_.Charge(size);
  }
  void* block = nullptr;
  try {
    block = c10::alloc_cpu(nbytes + kHeaderBytes);
  } catch (const c10::Error&) {
    // The cap admitted it, but this host could not give it: out of memory, as on a card that is full.
    host ? account_.RefundHost(size) : account_.Refund(size, origin);
    account_.ThrowHostOutOfMemory(
        size, std::string(host ? "host-side input" : "tensor memory") + ", which the system allocator refused");
  }
  new (block) BlockHeader{size, &account_, host, origin};
  void* data = static_cast<char*>(block) + kHeaderBytes;
  if (!host) account_.TraceAlloc(reinterpret_cast<uint64_t>(data), size);
  return {data, data, &DeleteBlock, c10::Device(c10::DeviceType::CPU)};
}

c10::DeleterFnPtr CpuTrackingAllocator::raw_deleter() const { return &DeleteBlock; }

void CpuTrackingAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  default_copy_data(dest, src, count);
}

}  // namespace oomguard
