#include "backends/meta/meta_item.h"

#include <ATen/ATen.h>
#include <ATen/ops/_local_scalar_dense_ops.h>
#include <torch/library.h>

namespace oomguard {
namespace {

thread_local int scopes = 0;

// On AutogradMeta, above the Meta kernel that throws: item() reaches _local_scalar_dense through it.
at::Scalar LocalScalarDense(c10::DispatchKeySet keys, const at::Tensor& self) {
  if (scopes > 0 && self.is_meta()) {
    if (self.scalar_type() == at::kBool) return at::Scalar(false);
    if (at::isFloatingType(self.scalar_type())) return at::Scalar(0.0);
    return at::Scalar(static_cast<int64_t>(0));
  }
  return at::_ops::_local_scalar_dense::redispatch(keys & c10::after_autograd_keyset, self);
}

void Register() {
  static torch::Library* library = [] {  // function-local: see RegisterMetaKernels
    auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::AutogradMeta, __FILE__, __LINE__);
    lib->impl("_local_scalar_dense", TORCH_FN(LocalScalarDense));
    return lib;
  }();
  (void)library;
}

}  // namespace

MetaItemScope::MetaItemScope() {
  Register();
  ++scopes;
}

MetaItemScope::~MetaItemScope() { --scopes; }

}  // namespace oomguard
