// CpuTrackingAllocator: the c10 CPU allocator that charges a DeviceAccount for every byte.
//
// Installed by InstallTrackingAllocators() (install.h) before any tensor exists; see Note [Install
// before the first tensor] there. It satisfies mkldnn's raw_allocate contract: the DataPtr's data and
// context are the same pointer, and raw_deleter() frees from that pointer alone.
//
// Note [Size header]: the deleter only receives the data pointer, so each block starts with a 64-byte
// header holding the requested size; data = block + 64 keeps c10's 64-byte alignment. The ledger is
// charged the requested size, never the header (Note [Why cpu peaks are exact], ledger.h).
#pragma once

#include <c10/core/Allocator.h>

#include "allocators/device_account.h"

namespace oomguard {

// Note [Host memory on the cpu backend]: on a GPU, a batch that starts on the host lives in host
// memory and only its copy occupies the device. On the cpu backend both are CPU memory, so allocations
// made inside a HostAllocationScope are left out of the ledger (and their frees with them): the
// cpu ledger then stands for device memory alone, as the cuda backend's does. They are still bounded
// by what the host has (DeviceAccount::ChargeHost, Note [Host memory is part of the cap]).
class HostAllocationScope {
 public:
  HostAllocationScope();
  ~HostAllocationScope();
  HostAllocationScope(const HostAllocationScope&) = delete;
  HostAllocationScope& operator=(const HostAllocationScope&) = delete;

 private:
  bool previous_;
};

// Whether `data` is the data pointer of a CPU block allocated inside a HostAllocationScope.
bool IsHostAllocation(const c10::DataPtr& data);

class CpuTrackingAllocator final : public c10::Allocator {
 public:
  explicit CpuTrackingAllocator(DeviceAccount& account);

  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

 private:
  DeviceAccount& account_;
};

}  // namespace oomguard
