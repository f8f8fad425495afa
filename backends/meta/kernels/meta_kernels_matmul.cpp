// The matrix products' Meta kernels (mm, addmm, bmm, baddbmm; addmv as LibTorch's): the result as
// LibTorch's structured shape function makes it, then the operand copies the kernel of the target makes
// before it calls BLAS, freed when it returns (Note [Operand copies of a matrix product]).
#include <ATen/ATen.h>
#include <ATen/ops/addmm_meta_dispatch.h>
#include <ATen/ops/addmv_meta_dispatch.h>
#include <ATen/ops/baddbmm_meta_dispatch.h>
#include <ATen/ops/bmm_meta_dispatch.h>
#include <ATen/ops/mm_meta_dispatch.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard {
namespace {

// Note [Operand copies of a matrix product]
// BLAS reads a matrix whose rows or columns are unit-strided with a leading dimension at least as
// large as the other extent; cpu's and CUDA's kernels copy an operand that is neither (the ones sum()'s
// backward expands to strides (0, 0), a column slice with a step) to a contiguous temporary, kept until
// the product is done. PyTorch's own Meta kernels allocate the result only, so on meta the backward of a
// Linear under `.sum()` booked 8,192 bytes less than cpu for an (8, 256) float gradient. These kernels
// allocate, after the result, what the target's kernel allocates, in its order:
// - cpu (aten/src/ATen/native/LinearAlgebra.cpp): addmm_impl_cpu_ (mm_out_cpu, addmm_out_cpu) casts a
//   row-major result as a transposed product (swapping the operands) and clones an operand BLAS cannot
//   read (CpuGemmCopies below). bmm_out_or_baddbmm_: no copy below 400 multiply-adds per item (its naive
//   kernel) or on MKL's batched gemm (every item row- or column-major, result contiguous, not bf16 or
//   half); else, batch by batch, addmm_impl_cpu_ on each item, its copies freed before the next.
//   A bf16 or half bmm that reaches BLAS runs oneDNN in 2.11 (whole-tensor copies by oneDNN's layout
//   rule), which is not mirrored: its copies are not booked.
// - a card (aten/src/ATen/native/cuda/Blas.cpp): cublasCommonArgs's prepare_matrix_for_cublas copies a
//   2-d operand that is not dense and not row- or column-major with a valid leading dimension, the
//   result too (then copies it back); baddbmm_out_cuda_impl (bmm, baddbmm) copies the result if no
//   item layout fits, and prepare_batch_matrix_for_cublas each batch whole, never item by item.
// The cuBLAS workspaces are not theirs to allocate (Note [cuBLAS workspaces held from the start]).
// Eager 2.11 on cpu agrees (the profiler's aten::clone events under aten::mm / aten::bmm); the tests
// are tests/meta_matmul_copies_test.cpp.

using Copies = std::vector<at::Tensor>;

int64_t AtLeastOne(int64_t v) { return std::max<int64_t>(1, v); }

// addmm_impl_cpu_'s casts of `result` (2-d) = m1 @ m2: the temporaries it makes, in order.
Copies CpuGemmCopies(const at::Tensor& result, at::Tensor m1, at::Tensor m2) {
  Copies copies;
  const auto sizes = result.sizes();
  const auto strides = result.strides();
  if (result.numel() == 0 || m1.size(1) == 0) return copies;
  bool transpose_c = false;
  if (strides[0] == 1 && (sizes[1] == 1 || strides[1] >= AtLeastOne(sizes[0]))) {
    transpose_c = false;
  } else if (strides[1] == 1 && (sizes[0] == 1 || strides[0] >= AtLeastOne(sizes[1]))) {
    std::swap(m1, m2);
    transpose_c = true;
  } else {
    copies.push_back(result.transpose(0, 1).contiguous());  // c made Fortran-contiguous, copied back
  }
  const int64_t m = sizes[transpose_c ? 1 : 0], n = sizes[transpose_c ? 0 : 1];
  const int64_t k = m1.size(transpose_c ? 0 : 1);
  const int fast = transpose_c ? 1 : 0, lead = transpose_c ? 0 : 1;
  const auto readable = [&](const at::Tensor& t, int64_t ld_plain, int64_t ld_transposed) {
    const auto s = t.strides();
    return (s[fast] == 1 && s[lead] >= AtLeastOne(ld_plain)) || (s[lead] == 1 && s[fast] >= AtLeastOne(ld_transposed));
  };
  if (!readable(m1, m, k)) copies.push_back(m1.clone(at::MemoryFormat::Contiguous));
  if (!readable(m2, k, n)) copies.push_back(m2.clone(at::MemoryFormat::Contiguous));
  return copies;
}

// prepare_matrix_for_cublas (result and operands alike for what it copies).
void CudaPrepareMatrix(const at::Tensor& t, Copies& copies) {
  if (t.is_non_overlapping_and_dense()) return;
  const auto s = t.strides();
  const auto z = t.sizes();
  if ((s[0] == 1 && s[1] >= AtLeastOne(z[0])) || (s[1] == 1 && s[0] >= AtLeastOne(z[1]))) return;
  copies.push_back(t.clone(at::MemoryFormat::Contiguous));
}

// cublasCommonArgs(mat1, mat2, result): the result first, then the operands in the order it takes them
// (which one is first depends on the result's layout; the bytes do not).
Copies CudaGemmCopies(const at::Tensor& result, const at::Tensor& m1, const at::Tensor& m2) {
  Copies copies;
  if (result.numel() == 0) return copies;
  const bool transpose_result = result.is_non_overlapping_and_dense()
                                    ? result.is_contiguous()
                                    : !(result.stride(0) == 1 && result.stride(1) >= AtLeastOne(result.size(0)));
  CudaPrepareMatrix(result, copies);
  CudaPrepareMatrix(transpose_result ? m2 : m1, copies);
  CudaPrepareMatrix(transpose_result ? m1 : m2, copies);
  return copies;
}

// baddbmm_out_cuda_impl and prepare_batch_matrix_for_cublas for a 3-d `result` = b1 @ b2.
Copies CudaBatchedGemmCopies(const at::Tensor& result, const at::Tensor& b1, const at::Tensor& b2) {
  Copies copies;
  if (result.numel() == 0 || b1.size(2) == 0) return copies;
  const auto rs = result.sizes();
  const auto rst = result.strides();
  bool transpose_result = false;
  if (rst[1] == 1 && (rs[2] == 1 || rst[2] >= AtLeastOne(rs[1]))) {
  } else if (rst[2] == 1 && (rs[1] == 1 || rst[1] >= AtLeastOne(rs[2]))) {
    transpose_result = true;
  } else {
    copies.push_back(result.transpose(1, 2).clone(at::MemoryFormat::Contiguous));
  }
  const int fast = transpose_result ? 2 : 1, lead = transpose_result ? 1 : 2;
  const int64_t m = rs[transpose_result ? 2 : 1], n = rs[lead];
  const int64_t k = (transpose_result ? b2 : b1).size(lead);
  const auto prepare = [&](const at::Tensor& t, int64_t ld_plain, int64_t ld_transposed) {
    const auto s = t.strides();
    if (s[fast] == 1 && s[lead] >= AtLeastOne(ld_plain)) return;
    if (s[lead] == 1 && s[fast] >= AtLeastOne(ld_transposed)) return;
    if (t.is_contiguous() && s[1] != 0 && s[2] != 0) return;
    copies.push_back(t.clone(at::MemoryFormat::Contiguous));
  };
  prepare(transpose_result ? b2 : b1, m, k);
  prepare(transpose_result ? b1 : b2, k, n);
  return copies;
}

// bmm_out_or_baddbmm_'s paths on cpu: the copies of each batch item are made and freed in turn.
void CpuBatchedGemmCopies(const at::Tensor& result, const at::Tensor& b1, const at::Tensor& b2) {
  const int64_t contraction = b1.size(2);
  if (result.numel() == 0 || contraction == 0 || contraction * b1.size(1) * b2.size(2) < 400) return;
  const auto items_fit = [](const at::Tensor& t) {
    const auto z = t.sizes();
    const auto s = t.strides();
    return (s[2] == 1 && (z[1] == 1 || s[1] >= z[2])) || (s[1] == 1 && (z[2] == 1 || s[2] >= z[1]));
  };
  const at::ScalarType dtype = result.scalar_type();
  const bool reduced = dtype == at::kBFloat16 || dtype == at::kHalf;
  if (reduced) return;  // oneDNN's path: not mirrored (Note [Operand copies of a matrix product])
  if (at::hasMKL() && (at::isFloatingType(dtype) || at::isComplexType(dtype)) && items_fit(b1) && items_fit(b2) &&
      result.is_contiguous()) {
    return;
  }
  for (int64_t b = 0; b < b1.size(0); ++b) (void)CpuGemmCopies(result.select(0, b), b1.select(0, b), b2.select(0, b));
}

bool OnACard() { return CurrentKernelTarget().cuda(); }

at::Tensor MmMeta(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor result = at::meta::mm(self, mat2);
  (void)(OnACard() ? CudaGemmCopies(result, self, mat2) : CpuGemmCopies(result, self, mat2));
  return result;
}
at::Tensor AddmmMeta(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                     const at::Scalar& alpha) {
  at::Tensor result = at::meta::addmm(self, mat1, mat2, beta, alpha);
  (void)(OnACard() ? CudaGemmCopies(result, mat1, mat2) : CpuGemmCopies(result, mat1, mat2));
  return result;
}
void BatchedGemmCopies(const at::Tensor& result, const at::Tensor& b1, const at::Tensor& b2) {
  if (OnACard()) {
    (void)CudaBatchedGemmCopies(result, b1, b2);
  } else {
    CpuBatchedGemmCopies(result, b1, b2);
  }
}
at::Tensor BmmMeta(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor result = at::meta::bmm(self, mat2);
  BatchedGemmCopies(result, self, mat2);
  return result;
}
at::Tensor BaddbmmMeta(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                       const at::Scalar& alpha) {
  at::Tensor result = at::meta::baddbmm(self, b1, b2, beta, alpha);
  BatchedGemmCopies(result, b1, b2);
  return result;
}
// addmv: LibTorch's, registered so that it wins over torch/_meta_registrations.py's in Python (Note
// [Which Meta kernel runs in Python]).
at::Tensor AddmvMeta(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                     const at::Scalar& alpha) {
  return at::meta::addmv(self, mat, vec, beta, alpha);
}

}  // namespace

namespace meta_kernels {
void RegisterMatmul(torch::Library& meta) {
  meta.impl("mm", TORCH_FN(MmMeta));
  meta.impl("addmm", TORCH_FN(AddmmMeta));
  meta.impl("bmm", TORCH_FN(BmmMeta));
  meta.impl("baddbmm", TORCH_FN(BaddbmmMeta));
  meta.impl("addmv", TORCH_FN(AddmvMeta));
}
}  // namespace meta_kernels

}  // namespace oomguard
