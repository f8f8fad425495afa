// Resizing a tensor's storage in place, as FSDP2 frees and re-materialises an unsharded parameter
// (untyped_storage().resize_(0), and back to its bytes): every tensor sharing the storage (the
// module's parameter, the views autograd saved) sees the new bytes.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace oomguard {

// Note [Resizing a storage on meta]: on cpu this is what Python's resize_ calls,
// at::native::resize_bytes_nocuda (resize_bytes_cpu: a new block from the storage's allocator, the
// old contents copied up to the smaller size, the old block freed). On meta LibTorch's
// resize_bytes_meta only sets nbytes and asks no allocator, so the ledger would see neither the free
// nor the new bytes; here meta storages take cpu's path through their allocator (the meta tracking
// allocator) instead, without the copy: the same bytes, booked at the same moments as on cpu.
void ResizeStorageBytes(const at::Tensor& tensor, size_t nbytes);

// foreach_reduce's copy-in where the reduce-scatter input `out` ([chunks, S]) has another dtype than
// the gradients (Note [FSDP2 mixed precision], fully_sharded.h): what _chunk_cat_out writes (each
// tensor's dim-0 chunks, padded with zeros to ceil(dim0 / chunks) rows, side by side in each row of
// out), cast as it is copied, allocating nothing, as CUDA's chunk_cat kernel does (_chunk_cat_out_cuda:
// bfloat16 into float32, contiguous; other pairs go through the composite and its temporaries, which
// this does not model: float16 into float32 is counted without them). On cpu,
// _chunk_cat_out with a dtype to cast to goes through cat's structured out= wrapper, which computes
// into a temporary of the inputs' dtype first (and pads a gradient in a copy), and oomguard's meta
// kernels do neither: this keeps cpu and meta equal, at the card's bytes.
void ChunkCatCasting(const std::vector<at::Tensor>& tensors, const at::Tensor& out, int64_t chunks);

// The bytes of the storages of `tensors` (undefined ones skipped), each storage once.
int64_t StorageBytes(const std::vector<at::Tensor>& tensors);

}  // namespace oomguard
