// Resizing a tensor's storage in place, as FSDP2 frees and re-materialises an unsharded parameter
// (untyped_storage().resize_(0), and back to its bytes): every tensor sharing the storage (the
// module's parameter, the views autograd saved) sees the new bytes.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>

namespace oomguard {

// Note [Resizing a storage on meta]: on cpu this is what Python's resize_ calls,
// at::native::resize_bytes_nocuda (resize_bytes_cpu: a new block from the storage's allocator, the
// old contents copied up to the smaller size, the old block freed). On meta LibTorch's
// resize_bytes_meta only sets nbytes and asks no allocator, so the ledger would see neither the free
// nor the new bytes; here meta storages take cpu's path through their allocator (the meta tracking
// allocator) instead, without the copy: the same bytes, booked at the same moments as on cpu.
void ResizeStorageBytes(const at::Tensor& tensor, size_t nbytes);

}  // namespace oomguard
