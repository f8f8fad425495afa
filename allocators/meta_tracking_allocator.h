// MetaTrackingAllocator: the c10 allocator for the meta device, charging a DeviceAccount.
//
// Meta tensors have shapes and no data, yet their storages still ask an allocator for nbytes
// (empty_meta -> StorageImpl). Replacing c10's MetaAllocator gives real byte accounting for
// shapes-only models: the meta backend's peaks are the ones the same program would reach on cpu.
//
// Note [Meta context]: data stays nullptr (nothing may be read). The DataPtr's context carries the
// byte count itself (low 56 bits) and the allocating phase (top byte), so the deleter credits the
// ledger with no side table and no heap allocation;
// c10 runs a deleter whenever the context is non-null, even with null data (UniqueVoidPtr.h).
// Note [Traced meta blocks]: while the account's AllocationTrace is on, a block needs an address for
// memory_viz and the free must find it again, and the context has no room left for one. Then the
// context points to a small heap record {bytes, origin, synthetic address} with its own deleter; off,
// nothing changes.
// Caveat: a meta resize_ (out= ops) changes nbytes without calling any allocator, so those bytes are
// not seen; structured kernels allocate fresh outputs and are seen.
#pragma once

#include <c10/core/Allocator.h>

#include "allocators/device_account.h"

namespace oomguard {

// Meta storages made on this thread while one is alive are charged to no account (and their frees
// credit none): a module file's meta tensors as the loader makes them, which the run replaces with its
// own before it measures anything (nn/torchscript/torchscript_net.h). The meta counterpart of HostAllocationScope.
class UncountedMetaScope {
 public:
  UncountedMetaScope();
  ~UncountedMetaScope();
  UncountedMetaScope(const UncountedMetaScope&) = delete;
  UncountedMetaScope& operator=(const UncountedMetaScope&) = delete;

 private:
  bool previous_;
};

class MetaTrackingAllocator final : public c10::Allocator {
 public:
  explicit MetaTrackingAllocator(DeviceAccount& account);

  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }  // no raw_allocate on meta
  void copy_data(void* dest, const void* src, std::size_t count) const override {}

 private:
  static void Delete(void* context);
  static void DeleteTraced(void* context);  // Note [Traced meta blocks]
  DeviceAccount& account_;
};

}  // namespace oomguard
