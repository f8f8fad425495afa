// The reductions on meta (sum here; mean's kernel in meta_kernels.cpp calls CudaReductionScratch; norms,
// amax, argmax, prod, any/all in meta_kernels_reduce_ops.cpp; var/std in meta_kernels_reduce_moments.cpp),
// and in card mode the scratch a card's Reduce.cuh kernels ask for while they run (Note [Reduce.cuh's
// global scratch], backends/meta/cuda_reduce_config.h).
#include <ATen/OpMathType.h>
#include <ATen/native/ReduceOpsUtils.h>

#include <vector>

#include "backends/meta/cuda_reduce_config.h"
#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

// TensorIterator::reduce_op's layout for reducing `dim` of `input` (ReduceLayoutOf, cuda_reduce_config.h).
ReduceLayout LayoutOfReduction(const at::Tensor& input, at::OptionalIntArrayRef dim, bool keepdim,
                               int64_t output_element_size) {
  const at::native::DimMask mask = at::native::make_dim_mask(dim, input.dim());
  std::vector<bool> reduced(static_cast<size_t>(input.dim()));
  for (int64_t d = 0; d < input.dim(); ++d) reduced[static_cast<size_t>(d)] = mask[d];
  return ReduceLayoutOf(input.sizes().vec(), input.strides().vec(), input.storage_offset(), reduced, keepdim,
                        input.element_size(), output_element_size);
}

// Note [A reduced-precision sum's float buffer on cpu]: ReduceOps.cpp's sum_out, for a bf16/fp16 sum whose
// TensorIterator keeps two reduced dimensions innermost (should_use_acc_buffer: >= 2 coalesced dimensions,
// the output's strides 0 in the first two), sums a float copy of the input into a float result and copies
// that into the bf16/fp16 one: a convolution's bias gradient, grad.sum([0, 2, 3]) of [2, 32, 16, 16] bf16,
// holds 65,536 + 128 bytes while it runs (issue 83149 in PyTorch). Before that, make_reduction casts an
// input whose dtype is not the result's (sum(dtype=...)) on cpu, which reduces in the result's dtype.
bool SumUsesAccumulatingBuffer(const at::Tensor& input, at::OptionalIntArrayRef dim, bool keepdim) {
  if (input.scalar_type() != at::kBFloat16 && input.scalar_type() != at::kHalf) return false;
  if (input.numel() == 0) return false;
  const ReduceLayout layout = LayoutOfReduction(input, dim, keepdim, input.element_size());
  return layout.ndim() >= 2 && layout.output_strides[0] == 0 && layout.output_strides[1] == 0;
}

// sum.dim_IntList: the structured meta function's result (get_dtype_from_self: integers and bools sum to
// int64); on cpu's kernels the copies sum_out makes (Note [A reduced-precision sum's float buffer on cpu]),
// on a card the reduction's scratch.
at::Tensor SumDimMeta(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = at::native::get_dtype_from_self(self, dtype, /*promote_integers=*/true);
  const at::DimVector sizes =
      at::native::shape_from_dim_mask(self, at::native::make_dim_mask(dim, self.dim()), keepdim);
  at::Tensor result = at::empty(sizes, self.options().dtype(out_dtype));
  if (CurrentKernelTarget().cuda()) {
    CudaReductionScratch(self, dim, keepdim, out_dtype);
    return result;
  }
  const at::Tensor input = self.scalar_type() == out_dtype || self.is_complex() ? self : self.to(out_dtype);
  if (SumUsesAccumulatingBuffer(input, dim, keepdim)) {
    const at::Tensor float_result = at::empty(sizes, self.options().dtype(at::kFloat));
    const at::Tensor float_input = self.to(at::kFloat);
  }
  return result;
}

}  // namespace

// ReduceOpsUtils.h make_reduction_from_out_ty, then gpu_reduce_kernel as ReduceSumProdKernel.cu's
// sum_functor and ReduceMomentKernel.cu's mean_kernel_impl instantiate it: a bf16/fp16 input reduces
// into a float result as it is ("gpu_lowp_to_f32"); any other dtype change is a cast copy of the input
// first (self.to(in_dtype)), alive while the kernel runs. The accumulator is the input's opmath type
// (float for bf16/fp16), and 16-bit inputs load 8 at a time (vt0 4, input_vec_size 8), others 4.
void CudaReductionScratch(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::ScalarType out_dtype) {
  const at::Tensor input = CudaReductionInput(self, out_dtype);
  const int64_t scalar_size = static_cast<int64_t>(input.element_size());
  CudaReduceKernelScratch(input, dim, keepdim, c10::elementSize(out_dtype),
                          ReduceKernelOf(c10::elementSize(at::toOpMathType(input.scalar_type())), input.scalar_type(),
                                         4, scalar_size == 2 ? 8 : 4));
}

// make_reduction's input on a card (ReduceOpsUtils.h): `self` for a bf16/fp16 input reduced into float,
// else `self` cast to the result's dtype (complex for a complex input).
at::Tensor CudaReductionInput(const at::Tensor& self, at::ScalarType out_dtype) {
  const at::ScalarType in = self.scalar_type();
  const bool lowp_to_f32 = (in == at::kHalf || in == at::kBFloat16) && out_dtype == at::kFloat;
  const at::ScalarType in_dtype = lowp_to_f32 ? in : self.is_complex() ? c10::toComplexType(out_dtype) : out_dtype;
  return in == in_dtype ? self : self.to(in_dtype);
}

ReduceKernel ReduceKernelOf(size_t arg_size, at::ScalarType scalar, int vt0, int input_vec_size) {
  ReduceKernel kernel;
  kernel.arg_size = static_cast<int>(arg_size);
  kernel.scalar_size = static_cast<int>(c10::elementSize(scalar));
  kernel.vt0 = vt0;
  kernel.input_vec_size = input_vec_size;
  kernel.max_num_threads = scalar == at::kComplexDouble ? 256 : 512;  // mnt_wrapper<scalar_t>
  return kernel;
}

// gpu_reduce_kernel (Reduce.cuh lines 1180-1283): setReduceConfig on the iterator TensorIterator::
// reduce_op builds, and where it splits the inputs across blocks, the staging buffer and the
// semaphores, both freed when the kernel has been launched. Past 32-bit indexing the kernel splits the
// iterator (TensorIterator::with_32bit_indexing) and may keep an accumulation buffer: not modelled, said.
void CudaReduceKernelScratch(const at::Tensor& input, at::OptionalIntArrayRef dim, bool keepdim,
                             int64_t output_element_size, const ReduceKernel& kernel) {
  if (input.numel() == 0) return;  // each op fills an empty reduction's result: no kernel
  const ReduceLayout layout = LayoutOfReduction(input, dim, keepdim, output_element_size);
  if (!layout.can_use_32bit_indexing()) {
    NoteKernelWarning(
        "a reduction past 32-bit indexing: Reduce.cuh splits it into sub-iterators, each with its own "
        "global scratch, and may keep an accumulation buffer; neither is modelled");
    return;
  }
  const ReduceConfig config = SetReduceConfig(layout, kernel, CurrentKernelTarget().device);
  if (!config.should_global_reduce()) return;
  const at::Tensor buffer = at::empty({config.global_memory_size()}, input.options().dtype(at::kByte));
  const at::Tensor semaphores = at::empty({config.semaphore_size()}, input.options().dtype(at::kByte));
}

void RegisterReduce(torch::Library& meta) {
  meta.impl("sum.dim_IntList", TORCH_FN(SumDimMeta));
  RegisterReduceOps(meta);
  RegisterReduceMoments(meta);
}

}  // namespace oomguard::meta_kernels
