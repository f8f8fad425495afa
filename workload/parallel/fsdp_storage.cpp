#include "workload/parallel/fsdp_storage.h"

#include <ATen/native/Resize.h>
#include <c10/core/StorageImpl.h>

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

}  // namespace oomguard
