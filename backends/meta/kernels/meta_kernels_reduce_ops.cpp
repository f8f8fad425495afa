// The reductions besides sum, mean and the moments whose CUDA kernels are Reduce.cuh's gpu_reduce_kernel:
// vector norms, amax/amin, aminmax, max/min (with and without indices), argmax/argmin, prod, any/all.
//
// Note [Each reduction's accumulator]: Reduce.cuh's scratch depends on the op only through sizeof(arg_t),
// the accumulator its ops_t reduces into (backends/meta/cuda_reduce_config.h), so each kernel here keeps
// PyTorch's own structured Meta function for its results (at::meta::*) and adds, on cpu's kernels, the
// input copies cpu's make_reduction makes (a cast to the result's dtype, argmax's reshape), which those
// Meta functions leave out; on a card, the CUDA op's own input copies (fewer: a bf16/fp16 input reduces
// into float as it is, any/all read any dtype) and gpu_reduce_kernel's scratch with that op's accumulator. The
// accumulators, vt0 and input_vec_size are read off torch 2.11's libtorch_cuda.so (`nm -C`: ReduceOp<scalar_t, ops_t,
// unsigned int, out_t, vt0, input_vec_size>), the .cu sources naming them beside each kernel; prod's, whose lambda
// types nm did not show us in full, from ReduceSumProdKernel.cu alone.
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/ops/all_meta_dispatch.h>
#include <ATen/ops/amax_meta_dispatch.h>
#include <ATen/ops/amin_meta_dispatch.h>
#include <ATen/ops/aminmax_meta_dispatch.h>
#include <ATen/ops/any_meta_dispatch.h>
#include <ATen/ops/argmax_meta_dispatch.h>
#include <ATen/ops/argmin_meta_dispatch.h>
#include <ATen/ops/linalg_vector_norm_meta_dispatch.h>
#include <ATen/ops/max_meta_dispatch.h>
#include <ATen/ops/min_meta_dispatch.h>
#include <ATen/ops/norm_meta_dispatch.h>
#include <ATen/ops/prod_meta_dispatch.h>

#include <optional>
#include <tuple>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

bool OnCard() { return CurrentKernelTarget().cuda(); }

// cpu's make_reduction (ReduceOpsUtils.h) reads the input in the result's dtype: a cast copy of an input
// of another dtype, alive while the kernel runs. PyTorch's Meta functions make the results alone.
void CpuCastCopy(const at::Tensor& self, at::ScalarType dtype) {
  if (self.scalar_type() == dtype || self.numel() == 0) return;
  const at::Tensor cast = self.to(dtype);
}

// SharedReduceOps.h MinMaxReductionOps::arg_t, detail::pair<scalar_t, int64_t> (cuda::std::pair): a
// value of up to 8 bytes and an int64 index, 16 bytes (MaxOps, MinOps, ArgMaxOps, ArgMinOps).
constexpr size_t kValueAndIndex = 16;

// ReduceNormKernel.cu norm_launch_kernel: NormOps, NormZeroOps, NormOneOps, NormTwoOps, AbsMaxOps and
// AbsMinOps accumulate in float for a bf16/fp16 input (into a bf16/fp16 or a float result), else in the
// input's real type (scalar_value_type: float for complex<float>); default vt0 4, input_vec_size 4.
// linalg_vector_norm_out makes the iterator with make_reduction(result.scalar_type()): a bf16/fp16
// input reduces into float as it is, any other dtype change casts the input first.
void NormScratch(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, const at::Tensor& result) {
  const at::Tensor input = CudaReductionInput(self, result.scalar_type());
  const at::ScalarType real = c10::toRealValueType(input.scalar_type());
  const at::ScalarType acc = real == at::kHalf || real == at::kBFloat16 ? at::kFloat : real;
  CudaReduceKernelScratch(input, dim, keepdim, result.element_size(),
                          ReduceKernelOf(c10::elementSize(acc), input.scalar_type(), 4, 4));
}

// On cpu, the norm reads its input in the result's dtype (complex: the result's complex type).
void Norm(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, const at::Tensor& result) {
  if (OnCard()) {
    NormScratch(self, dim, keepdim, result);
  } else if (!self.is_complex()) {
    CpuCastCopy(self, result.scalar_type());
  }
}

at::Tensor LinalgVectorNormMeta(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim,
                                bool keepdim, std::optional<at::ScalarType> dtype) {
  at::Tensor result = at::meta::linalg_vector_norm(self, ord, dim, keepdim, dtype);
  Norm(self, dim, keepdim, result);
  return result;
}

// norm.ScalarOpt_dim (Tensor::norm(p), torch.norm, what libtorch's clip_grad_norm_ calls per gradient):
// ReduceOps.cpp impl_func_norm is linalg_vector_norm_out into the result.
at::Tensor NormDimMeta(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim, bool keepdim) {
  at::Tensor result = at::meta::norm(self, p, dim, keepdim);
  Norm(self, dim, keepdim, result);
  return result;
}
at::Tensor NormDimDtypeMeta(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim,
                            bool keepdim, at::ScalarType dtype) {
  at::Tensor result = at::meta::norm(self, p, dim, keepdim, dtype);
  Norm(self, dim, keepdim, result);
  return result;
}

// ReduceMaxValuesKernel.cu / ReduceMinValuesKernel.cu max_values_kernel_cuda_impl: func_wrapper<scalar_t>
// (MaxNanFunctor<scalar_t>): the accumulator is the input's own type, 2 bytes for bf16; vt0 4,
// input_vec_size 4. amax_out's make_reduction in the input's dtype: no copy.
void ValuesScratch(const at::Tensor& input, at::OptionalIntArrayRef dim, bool keepdim) {
  CudaReduceKernelScratch(input, dim, keepdim, input.element_size(),
                          ReduceKernelOf(input.element_size(), input.scalar_type(), 4, 4));
}

at::Tensor AmaxMeta(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  at::Tensor result = at::meta::amax(self, dim, keepdim);
  if (OnCard()) ValuesScratch(self, dim, keepdim);
  return result;
}
at::Tensor AminMeta(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  at::Tensor result = at::meta::amin(self, dim, keepdim);
  if (OnCard()) ValuesScratch(self, dim, keepdim);
  return result;
}

// max()/min() over everything, which PyTorch's C++ registers no Meta kernel for: ReduceAllOps.cpp max
// (cpu and cuda alike) makes a 0-dim result and reduces self.contiguous(), a copy of a strided input;
// CUDA's max_all_kernel_impl runs max_values_kernel_cuda_impl (above) on it.
at::Tensor AllValuesMeta(const at::Tensor& self, const char* name) {
  TORCH_CHECK(self.numel() > 0, name,
              "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with "
              "the 'dim' argument.");
  at::Tensor result = at::empty({}, self.options());
  const at::Tensor input = self.contiguous();
  if (OnCard()) ValuesScratch(input, at::IntArrayRef{}, false);
  return result;
}
at::Tensor MaxAllMeta(const at::Tensor& self) { return AllValuesMeta(self, "max"); }
at::Tensor MinAllMeta(const at::Tensor& self) { return AllValuesMeta(self, "min"); }

// aminmax (fp8 scaling's range): TensorCompare.cpp's aminmax_out, cpu and cuda alike, reduces over a
// dimension in place or, without one, self.contiguous() (a copy of a strided input). ReduceAMinMaxKernel.cu
// runs MinMaxOps<scalar_t, scalar_t, int32_t>, whose accumulator is a pair of the input's type (8 bytes
// for fp32, 4 for bf16); no kernel for an empty input.
std::tuple<at::Tensor, at::Tensor> AminmaxMeta(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  auto result = at::meta::aminmax(self, dim, keepdim);
  const ReduceKernel kernel = ReduceKernelOf(2 * self.element_size(), self.scalar_type(), 4, 4);
  if (dim.has_value()) {
    if (OnCard() && self.dim() > 0) {
      CudaReduceKernelScratch(self, at::IntArrayRef{at::maybe_wrap_dim(*dim, self.dim())}, keepdim, self.element_size(),
                              kernel);
    }
    return result;
  }
  const at::Tensor input = self.contiguous();
  if (OnCard()) CudaReduceKernelScratch(input, at::IntArrayRef{}, false, self.element_size(), kernel);
  return result;
}

// max.dim/min.dim: TensorCompare.cpp minmax_out_impl runs the kernel unless the input is empty or one
// 0-dim element; ReduceMinMaxKernel.cu max_launch_kernel's MaxOps<scalar_t> carries value and index.
void WithIndicesScratch(const at::Tensor& self, int64_t dim, bool keepdim) {
  if (self.dim() == 0) return;
  CudaReduceKernelScratch(self, at::IntArrayRef{dim}, keepdim, self.element_size(),
                          ReduceKernelOf(kValueAndIndex, self.scalar_type(), 4, 4));
}
std::tuple<at::Tensor, at::Tensor> MaxDimMeta(const at::Tensor& self, int64_t dim, bool keepdim) {
  auto result = at::meta::max(self, dim, keepdim);
  if (OnCard()) WithIndicesScratch(self, dim, keepdim);
  return result;
}
std::tuple<at::Tensor, at::Tensor> MinDimMeta(const at::Tensor& self, int64_t dim, bool keepdim) {
  auto result = at::meta::min(self, dim, keepdim);
  if (OnCard()) WithIndicesScratch(self, dim, keepdim);
  return result;
}

// ReduceOps.cpp argmax_argmin_impl (cpu and cuda alike): a dimension of size 1 fills zeros; without a
// dimension the input is self.reshape({-1}) (a copy where it cannot be viewed so).
// ReduceArgMaxKernel.cu argmax_kernel_cuda: ArgMaxOps<acc_t> (float for bf16/fp16), value and index,
// vt0 4, input_vec_size 4.
void ArgScratch(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  if (self.dim() == 0) return;
  if (dim.has_value()) {
    const int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    if (self.size(d) == 1 || !OnCard()) return;
    CudaReduceKernelScratch(self, at::IntArrayRef{d}, keepdim, 8,
                            ReduceKernelOf(kValueAndIndex, self.scalar_type(), 4, 4));
    return;
  }
  const at::Tensor flat = self.reshape({-1});
  if (OnCard()) {
    CudaReduceKernelScratch(flat, at::IntArrayRef{}, false, 8,
                            ReduceKernelOf(kValueAndIndex, flat.scalar_type(), 4, 4));
  }
}
at::Tensor ArgmaxMeta(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor result = at::meta::argmax(self, dim, keepdim);
  ArgScratch(self, dim, keepdim);
  return result;
}
at::Tensor ArgminMeta(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor result = at::meta::argmin(self, dim, keepdim);
  ArgScratch(self, dim, keepdim);
  return result;
}

// ReduceOps.cpp allany_impl: no kernel for an empty input; one element is copied (.to(kBool): a copy
// of a non-bool one); else get_allany_iter, on CUDA make_reduction in the input's own dtype, on cpu
// make_reduction_from_out_ty (a copy in the result's dtype: bool, or uint8 for uint8).
// ReduceLogicKernel.cu and_kernel_cuda/or_kernel_cuda: func_wrapper<bool>(lambda(scalar_t, scalar_t)),
// so the accumulator is the input's type; vt0 4, input_vec_size 4.
void LogicScratch(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, const at::Tensor& result) {
  if (self.numel() == 0) return;
  if (self.numel() == 1) {
    const at::Tensor one = self.view_as(result).to(at::kBool);
    return;
  }
  if (!OnCard()) {
    CpuCastCopy(self, result.scalar_type());  // bool, or uint8 for a uint8 input
    return;
  }
  CudaReduceKernelScratch(self, dim, keepdim, 1, ReduceKernelOf(self.element_size(), self.scalar_type(), 4, 4));
}
template <bool kAll>
at::Tensor LogicDimMeta(const at::Tensor& self, int64_t dim, bool keepdim) {
  at::Tensor result = kAll ? at::meta::all(self, dim, keepdim) : at::meta::any(self, dim, keepdim);
  LogicScratch(self, at::IntArrayRef{dim}, keepdim, result);
  return result;
}
template <bool kAll>
at::Tensor LogicDimsMeta(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  at::Tensor result = kAll ? at::meta::all(self, dim, keepdim) : at::meta::any(self, dim, keepdim);
  LogicScratch(self, dim, keepdim, result);
  return result;
}
template <bool kAll>
at::Tensor LogicAllMeta(const at::Tensor& self) {
  at::Tensor result = kAll ? at::meta::all(self) : at::meta::any(self);
  LogicScratch(self, at::IntArrayRef{}, false, result);
  return result;
}

// prod: ReduceOps.cpp impl_func_prod, make_reduction_from_out_ty as sum's (a bf16/fp16 input into
// float as it is, another dtype change a cast copy), no kernel for an empty input.
// ReduceSumProdKernel.cu prod_functor<scalar_t, acc_t>: float for bf16/fp16, else the type itself;
// default vt0 4, input_vec_size 4 (sum's 16-bit loads of 8 are sum_functor's alone).
void ProdScratch(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, const at::Tensor& result) {
  const at::Tensor input = CudaReductionInput(self, result.scalar_type());
  CudaReduceKernelScratch(
      input, dim, keepdim, result.element_size(),
      ReduceKernelOf(c10::elementSize(at::toOpMathType(input.scalar_type())), input.scalar_type(), 4, 4));
}
at::Tensor ProdDimMeta(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  at::Tensor result = at::meta::prod(self, dim, keepdim, dtype);
  if (OnCard()) {
    ProdScratch(self, at::IntArrayRef{dim}, keepdim, result);
  } else {
    CpuCastCopy(self, result.scalar_type());
  }
  return result;
}
// prod() over everything, without a C++ Meta kernel: ReduceOps.cpp prod makes the 0-dim result
// (integers promoted to int64) and runs impl_func_prod.
at::Tensor ProdAllMeta(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  const at::ScalarType out = at::native::get_dtype_from_self(self, dtype, /*promote_integers=*/true);
  at::Tensor result = at::empty({}, self.options().dtype(out));
  if (OnCard()) {
    ProdScratch(self, at::IntArrayRef{}, false, result);
  } else {
    CpuCastCopy(self, out);
  }
  return result;
}

}  // namespace

void RegisterReduceOps(torch::Library& meta) {
  meta.impl("linalg_vector_norm", TORCH_FN(LinalgVectorNormMeta));
  meta.impl("norm.ScalarOpt_dim", TORCH_FN(NormDimMeta));
  meta.impl("norm.ScalarOpt_dim_dtype", TORCH_FN(NormDimDtypeMeta));
  meta.impl("amax", TORCH_FN(AmaxMeta));
  meta.impl("amin", TORCH_FN(AminMeta));
  meta.impl("max", TORCH_FN(MaxAllMeta));
  meta.impl("min", TORCH_FN(MinAllMeta));
  meta.impl("aminmax", TORCH_FN(AminmaxMeta));
  meta.impl("max.dim", TORCH_FN(MaxDimMeta));
  meta.impl("min.dim", TORCH_FN(MinDimMeta));
  meta.impl("argmax", TORCH_FN(ArgmaxMeta));
  meta.impl("argmin", TORCH_FN(ArgminMeta));
  meta.impl("any.dim", TORCH_FN(LogicDimMeta<false>));
  meta.impl("any.dims", TORCH_FN(LogicDimsMeta<false>));
  meta.impl("any", TORCH_FN(LogicAllMeta<false>));
  meta.impl("all.dim", TORCH_FN(LogicDimMeta<true>));
  meta.impl("all.dims", TORCH_FN(LogicDimsMeta<true>));
  meta.impl("all", TORCH_FN(LogicAllMeta<true>));
  meta.impl("prod.dim_int", TORCH_FN(ProdDimMeta));
  meta.impl("prod", TORCH_FN(ProdAllMeta));
}

}  // namespace oomguard::meta_kernels
