// Meta kernels for the arithmetic ops whose cpu TensorIterator copies an operand of another dtype
// (Note [Operands promoted on cpu]), for linear's bias added in place on cpu (LinearAutogradMeta), and
// for autograd's sum of two gradient contributions, in place on cpu (Note [Gradient sums on meta]).
//
// Note [Operands promoted on cpu]: a TensorIterator op whose inputs differ in dtype (a bf16 tensor
// times a bool mask: a hand-written dropout; a bf16 branch added to a float32 residual stream) computes
// in their common dtype. On cpu, TensorIterator::compute_types first casts each input of another dtype
// to it (`op.tensor().to(common_dtype)`, a temporary freed when the op returns), then allocates the
// output; on any other device the kernel reads mixed dtypes in place, and so does meta's. These kernels
// make cpu's casts on meta, then let the structured Meta function (at::meta::...) make the output. A
// wrapped number (`t * 2.0`) is left out: its cast is host memory (Note [Host scalars]). With a card's
// kernels (`--kernels cuda`, Note [Meta as a card]) there is no cast: CUDA's TensorIterator
// (TensorIterator.cpp, compute_types: the temporaries are made only when the common device is cpu)
// reads each operand in its own dtype and casts while it computes (Loops.cuh's dynamic casting).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/add_meta_dispatch.h>
#include <ATen/ops/div_meta_dispatch.h>
#include <ATen/ops/linear_native.h>
#include <ATen/ops/mul_meta_dispatch.h>
#include <ATen/ops/sub_meta_dispatch.h>

#include <optional>
#include <string_view>

#include "backends/meta/kernel_target.h"
#include "backends/meta/meta_gradient_sums.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

// cpu's casts of `self` and `other` to their common dtype (float for an integer division), alive
// while the op runs.
struct PromotedOperands {
  PromotedOperands(const at::Tensor& self, const at::Tensor& other, bool integer_to_float = false) {
    if (CurrentKernelTarget().cuda()) return;
    at::ScalarType common = at::result_type(self, other);
    if (integer_to_float && at::isIntegralType(common, /*includeBool=*/true)) {
      common = c10::typeMetaToScalarType(c10::get_default_dtype());
    }
    for (const at::Tensor* t : {&self, &other}) {
      if (t->scalar_type() == common || !t->is_meta() || t->unsafeGetTensorImpl()->is_wrapped_number()) continue;
      casts.push_back(t->to(common));
    }
  }
  std::vector<at::Tensor> casts;
};

// Note [Gradient sums on meta]: where two gradient contributions meet (a residual connection, a tensor
// used twice), the autograd engine sums them in its InputBuffer (torch/csrc/autograd/input_buffer.cpp,
// accumulate): `old_var.add_(var)` when grad mode is off and it holds the last reference to a dense
// `old_var`, else `old_var + var`. But it adds in place only for tensors that are not subclass-like,
// and meta tensors are (at::isTensorSubclassLike), so on meta every such sum would allocate a new
// buffer and free the old one: one allocation more than cpu, and a transient the gradient's size that
// can raise a backward peak. An add is the engine's own when the engine runs between its nodes'
// functions (backends/meta/meta_gradient_sums.h: only its InputBuffer sums and a user's gradient hooks add
// there); under that condition, and cpu's own for the in-place path, the sum is made in place, as on cpu.
bool IsEnginesSumCpuMakesInPlace(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (at::GradMode::is_enabled()) return false;
  if (!alpha.isIntegral(/*includeBool=*/false) || alpha.toLong() != 1) return false;
  if (!EngineRunsBetweenNodes()) return false;
  // cpu's can_accumulate_inplace(old_var), less the subclass test.
  if (self.is_sparse() || other.is_sparse() || self.is_nested() || self._is_zerotensor() ||
      !self.is_non_overlapping_and_dense() || !self.has_storage() || self.use_count() != 1 ||
      self.storage().use_count() != 1) {
    return false;
  }
  // What add_ can hold: the sum's dtype and shape are self's.
  return at::result_type(self, other) == self.scalar_type() && at::infer_size(self.sizes(), other.sizes()) == self.sizes();
}

at::Tensor AddMeta(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  const bool in_place = IsEnginesSumCpuMakesInPlace(self, other, alpha);
  const PromotedOperands promoted(self, other);
  if (!in_place) return at::meta::add(self, other, alpha);
  // The engine replaces its buffer with the result: the same tensor, as cpu's add_ returns.
  at::Tensor& sum = const_cast<at::Tensor&>(self);
  at::meta::add_(sum, other, alpha);
  return sum;
}
at::Tensor& AddInplaceMeta(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  const PromotedOperands promoted(self, other);
  return at::meta::add_(self, other, alpha);
}
at::Tensor SubMeta(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  const PromotedOperands promoted(self, other);
  return at::meta::sub(self, other, alpha);
}
at::Tensor& SubInplaceMeta(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  const PromotedOperands promoted(self, other);
  return at::meta::sub_(self, other, alpha);
}
at::Tensor MulMeta(const at::Tensor& self, const at::Tensor& other) {
  const PromotedOperands promoted(self, other);
  return at::meta::mul(self, other);
}
at::Tensor& MulInplaceMeta(at::Tensor& self, const at::Tensor& other) {
  const PromotedOperands promoted(self, other);
  return at::meta::mul_(self, other);
}
at::Tensor DivMeta(const at::Tensor& self, const at::Tensor& other) {
  const PromotedOperands promoted(self, other, /*integer_to_float=*/true);
  return at::meta::div(self, other);
}
at::Tensor& DivInplaceMeta(at::Tensor& self, const at::Tensor& other) {
  const PromotedOperands promoted(self, other, /*integer_to_float=*/true);
  return at::meta::div_(self, other);
}

// linear of an input that is neither 2-d nor contiguous (the transposed [seq, batch, features] view
// nn.MultiheadAttention projects) runs matmul, then adds the bias: in place on cpu, out of place for a
// meta tensor, which at::native::linear treats as a tensor subclass (isTensorSubclassLike), one
// output-sized allocation more. This kernel adds in place there, as cpu does, and leaves every other
// case to the composite itself.
at::Tensor LinearAutogradMeta(const at::Tensor& input, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias) {
  if (!bias.has_value() || !bias->defined() || input.dim() == 2 || input.dim() == 0 || weight.dim() == 0 ||
      input.is_contiguous()) {
    return at::native::linear(input, weight, bias);
  }
  at::Tensor output = at::matmul(input, weight.t());
  output.add_(*bias);
  return output;
}

}  // namespace

void RegisterPromote(torch::Library& meta, torch::Library& autograd_meta) {
  autograd_meta.impl("linear", TORCH_FN(LinearAutogradMeta));
  meta.impl("add.Tensor", TORCH_FN(AddMeta));
  meta.impl("add_.Tensor", TORCH_FN(AddInplaceMeta));
  meta.impl("sub.Tensor", TORCH_FN(SubMeta));
  meta.impl("sub_.Tensor", TORCH_FN(SubInplaceMeta));
  meta.impl("mul.Tensor", TORCH_FN(MulMeta));
  meta.impl("mul_.Tensor", TORCH_FN(MulInplaceMeta));
  meta.impl("div.Tensor", TORCH_FN(DivMeta));
  meta.impl("div_.Tensor", TORCH_FN(DivInplaceMeta));
}

}  // namespace oomguard::meta_kernels
