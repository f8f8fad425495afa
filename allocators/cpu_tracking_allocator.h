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

#include <cstdint>
#include <functional>
#include <optional>

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

// As HostAllocationScope, for every thread of the process while it lives: what a collective's own
// threads allocate while the controlling thread waits for it (Note [Gloo's buffers are host memory],
// workload/parallel/rank_group.cpp). Scopes nest; made and destroyed on one thread.
class ProcessHostAllocationScope {
 public:
  ProcessHostAllocationScope();
  ~ProcessHostAllocationScope();
  ProcessHostAllocationScope(const ProcessHostAllocationScope&) = delete;
  ProcessHostAllocationScope& operator=(const ProcessHostAllocationScope&) = delete;
};

// Note [Python's wrapped numbers]: Python's argument parser makes a number passed where a tensor is
// expected (`loss / 4`, `x * 0.5` through the Tensor overload) into a 0-dim cpu tensor of 1 to 16
// bytes (torch/csrc/utils/python_arg_parser.cpp, scalar_to_tensor: bool, int64, float64, complex128),
// outside any operator; on a GPU (and on meta) it is host memory beside the kernel launch. While this
// thread runs no operator and is the Python measurement's (backends/host_scalars.cpp says when), an
// allocation of at most kLargestWrappedNumberBytes is booked as host memory. Operators' own 0-dim
// tensors are made inside an operator, so they stay the device's.
constexpr size_t kLargestWrappedNumberBytes = 16;  // complex128
void SetTinyAllocationsAreHost(bool on);

// Whether `data` is the data pointer of a CPU block allocated inside a HostAllocationScope.
bool IsHostAllocation(const c10::DataPtr& data);

// The bytes asked for when the block whose data pointer is `data` was allocated; nullopt when the block
// is not this allocator's (or `data` points inside a block rather than at its start).
std::optional<int64_t> AllocatedBytes(const c10::DataPtr& data);

// Note [Watching while host blocks live]: on cpu and meta a transfer's source is a host block, and the
// transfer counter needs every operator's inputs boxed to see one (workload/transfer_counter.h); so it
// watches only while a host block is alive, told here when their number goes from none to some and
// back. `listener` is called at once with the state now, then at each change, on the thread that made
// it (inside the allocation or the free); an empty function clears it. One listener at a time.
using HostBlocksListener = std::function<void(bool any_alive)>;
void SetHostBlocksListener(HostBlocksListener listener);
// Host blocks allocated and not yet freed, in this process.
int64_t LiveHostBlocks();

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
