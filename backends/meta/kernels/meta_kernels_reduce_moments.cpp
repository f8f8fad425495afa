// var, std, var_mean and std_mean on meta, which PyTorch's C++ registers no Meta kernel for (only
// torch/_meta_registrations.py's Python one): ReduceOps.cpp std_var_out and std_var_mean_out, shared by
// cpu and cuda, with what each device's kernel allocates besides the results.
//
// Note [Welford's scratch on a card]: ReduceMomentKernel.cu std_var_kernel_impl runs gpu_reduce_kernel<
// scalar_t, out_t, 2> (vt0 2, so input_vec_size 2: "reducing unrolling factor to 2 for welford kernel")
// with WelfordOps<scalar_t, acc_scalar_t, int32_t, pair<out_t, out_t>>, whose accumulator (arg_t) is
// SharedReduceOps.h's WelfordData<acc_scalar_t, int32_t> {acc mean; acc m2; int32_t n; acc nf;}:
// acc_type<scalar_t, /*is_cuda=*/true> is float for bf16/fp16/float, 16 bytes, and double for double,
// 8 + 8 + 4 (+4 padding) + 8 = 32 bytes (the instantiations in torch 2.11's libtorch_cuda.so:
// ReduceOp<c10::BFloat16, WelfordOps<c10::BFloat16, float, int, pair<...>>, unsigned int, c10::BFloat16,
// 2, 2>). The iterator is make_reduction(result's dtype), the input's own real dtype: no cast copy, and a
// bf16 var accumulates in float inside the kernel (no float copy of the input, as cpu makes none either).
// var_mean's iterator has two outputs; setReduceConfig does not look at their number.
#include <ATen/AccumulateType.h>
#include <ATen/native/ReduceOpsUtils.h>

#include <optional>
#include <tuple>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

// A reduced result (shape_from_dim_mask), as make_reduction resizes the empty one the op makes.
at::Tensor Reduced(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::ScalarType dtype) {
  const at::DimVector sizes =
      at::native::shape_from_dim_mask(self, at::native::make_dim_mask(dim, self.dim()), keepdim);
  return at::empty(sizes, self.options().dtype(dtype));
}

void CheckMoments(const char* fname, const at::Tensor& self) {
  TORCH_CHECK(self.layout() == at::Layout::Strided, fname, " only supports strided layout, got: ", self.layout());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()), fname,
              " only support floating point and complex dtypes");
}

// std_var_stub's kernel over a real `self` into a result of `result_numel` elements; `var_only`: not
// var_mean (whose cpu kernel has no all-reduce fast path).
void MomentsKernel(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, int64_t result_numel,
                   bool var_only) {
  if (self.numel() == 0) return;  // "Trivial reduction": NaN-filled, no kernel
  if (CurrentKernelTarget().cuda()) {
    CudaWelfordScratch(self, dim, keepdim, self.element_size());
    return;
  }
  // cpu: an all-reduce of float/double is std_var_all_cpu, which reads self.mean().item() (a 0-dim mean,
  // freed on return) before it walks the input; the others reduce in registers (binary_kernel_reduce).
  if (var_only && result_numel == 1 && self.scalar_type() != at::kBFloat16 && self.scalar_type() != at::kHalf) {
    const at::Tensor mean = at::empty({}, self.options());
  }
}

// std_var_out: a complex input reduces its real and imaginary parts into two real temporaries, adds
// them into the result (and takes the root in place).
at::Tensor StdVarMeta(const char* fname, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  CheckMoments(fname, self);
  const at::ScalarType real = c10::toRealValueType(self.scalar_type());
  at::Tensor result = Reduced(self, dim, keepdim, real);
  if (self.is_complex()) {
    const at::Tensor real_out = Reduced(self, dim, keepdim, real);
    MomentsKernel(at::real(self), dim, keepdim, real_out.numel(), true);
    const at::Tensor imag_out = Reduced(self, dim, keepdim, real);
    MomentsKernel(at::imag(self), dim, keepdim, imag_out.numel(), true);
    return result;
  }
  MomentsKernel(self, dim, keepdim, result.numel(), true);
  return result;
}

// std_var_mean_out: the (real) variance and the mean in self's dtype; a complex input through four
// real temporaries (variance and mean of each part), combined into the results.
std::tuple<at::Tensor, at::Tensor> StdVarMeanMeta(const char* fname, const at::Tensor& self,
                                                  at::OptionalIntArrayRef dim, bool keepdim) {
  CheckMoments(fname, self);
  const at::ScalarType real = c10::toRealValueType(self.scalar_type());
  at::Tensor var = Reduced(self, dim, keepdim, real);
  at::Tensor mean = Reduced(self, dim, keepdim, self.scalar_type());
  if (self.is_complex()) {
    const at::Tensor real_var = Reduced(self, dim, keepdim, real);
    const at::Tensor real_mean = Reduced(self, dim, keepdim, real);
    MomentsKernel(at::real(self), dim, keepdim, real_var.numel(), false);
    const at::Tensor imag_var = Reduced(self, dim, keepdim, real);
    const at::Tensor imag_mean = Reduced(self, dim, keepdim, real);
    MomentsKernel(at::imag(self), dim, keepdim, imag_var.numel(), false);
    return {var, mean};
  }
  MomentsKernel(self, dim, keepdim, var.numel(), false);
  return {var, mean};
}

at::Tensor VarMeta(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>&,
                   bool keepdim) {
  return StdVarMeta("var", self, dim, keepdim);
}
at::Tensor StdMeta(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>&,
                   bool keepdim) {
  return StdVarMeta("std", self, dim, keepdim);
}
std::tuple<at::Tensor, at::Tensor> VarMeanMeta(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                               const std::optional<at::Scalar>&, bool keepdim) {
  return StdVarMeanMeta("var_mean", self, dim, keepdim);
}
std::tuple<at::Tensor, at::Tensor> StdMeanMeta(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                               const std::optional<at::Scalar>&, bool keepdim) {
  return StdVarMeanMeta("std_mean", self, dim, keepdim);
}

}  // namespace

void CudaWelfordScratch(const at::Tensor& input, at::OptionalIntArrayRef dim, bool keepdim,
                        int64_t output_element_size) {
  const at::ScalarType acc = at::toAccumulateType(input.scalar_type(), c10::DeviceType::CUDA);
  const size_t welford = c10::elementSize(acc) == 8 ? 32 : 16;  // Note [Welford's scratch on a card]
  CudaReduceKernelScratch(input, dim, keepdim, output_element_size, ReduceKernelOf(welford, input.scalar_type(), 2, 2));
}

void RegisterReduceMoments(torch::Library& meta) {
  meta.impl("var.correction", TORCH_FN(VarMeta));
  meta.impl("std.correction", TORCH_FN(StdMeta));
  meta.impl("var_mean.correction", TORCH_FN(VarMeanMeta));
  meta.impl("std_mean.correction", TORCH_FN(StdMeanMeta));
}

}  // namespace oomguard::meta_kernels
