#include "workload/parallel/fsdp_storage.h"

#include <ATen/native/Resize.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <set>

#include "base/check.h"

namespace oomguard {

void ResizeStorageBytes(const at::Tensor& tensor, size_t nbytes) {
  const c10::Storage& storage = tensor.storage();
  if (storage.nbytes() == nbytes) return;  // FSDP2's alloc_storage and free_storage check the same
  if (!tensor.is_meta()) return at::native::resize_bytes_nocuda(storage, static_cast<int64_t>(nbytes));
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  OOMGUARD_CHECK(impl->resizable()) << "a storage FSDP resizes is resizable";
  c10::DataPtr block;
  if (nbytes != 0) block = impl->allocator()->allocate(nbytes);
  impl->set_data_ptr_noswap(std::move(block));  // the old block is freed here
  impl->set_nbytes(nbytes);
}

int64_t StorageBytes(const std::vector<at::Tensor>& tensors) {
  std::set<const c10::StorageImpl*> seen;
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && seen.insert(t.storage().unsafeGetStorageImpl()).second) {
      bytes += static_cast<int64_t>(t.storage().nbytes());
    }
  }
  return bytes;
}

void ChunkCatCasting(const std::vector<at::Tensor>& tensors, const at::Tensor& out, int64_t chunks) {
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    const int64_t dim0 = t.size(0), rest = dim0 == 0 ? 0 : t.numel() / dim0, rows = (dim0 + chunks - 1) / chunks;
    if (rows * rest == 0) continue;
    const at::Tensor source = t.reshape({dim0, rest});
    const at::Tensor target = out.narrow(1, offset, rows * rest).view({chunks, rows, rest});
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t mine = std::clamp<int64_t>(dim0 - c * rows, 0, rows);
      if (mine > 0) target.select(0, c).narrow(0, 0, mine).copy_(source.narrow(0, c * rows, mine));
      if (mine < rows) target.select(0, c).narrow(0, mine, rows - mine).zero_();
    }
    offset += rows * rest;
  }
}

}  // namespace oomguard
