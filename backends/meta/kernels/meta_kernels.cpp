#include "backends/meta/kernels/meta_kernels.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <torch/library.h>

#include <cmath>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard {
namespace {

// Note [Meta kernels mirror the cpu kernels' allocations]
// A meta kernel must produce the output's shape and dtype, and for byte fidelity it also makes the
// allocations the cpu kernel makes: the same outputs, the same contiguous() copies of its inputs and
// the same scratch buffers, in the same order, so the meta ledger reads what the cpu ledger reads
// (tests/meta_coverage_test.cpp compares them). Each kernel names the cpu allocation it mirrors.
// resize_ on meta grows a storage's nbytes without asking the allocator, so where cpu resizes an empty
// tensor (at::empty({0}) then resize_, TensorIterator outputs) a Meta kernel allocates the tensor whole.

// relu's output has its input's shape and dtype; relu_ returns its input.
at::Tensor ReluMeta(const at::Tensor& self) { return at::empty_like(self); }
at::Tensor& ReluInplaceMeta(at::Tensor& self) { return self; }

// hardswish (MobileNetV3) and hardtanh (ReLU6: MobileNetV2), which LibTorch's C++ build has no Meta
// kernel for: cpu's forward makes one output like its input (hardswish a TensorIterator unary op,
// hardtanh empty_like then clamp_out into it), its backward one output shaped like the broadcast of
// grad and input (a TensorIterator binary op); the in-place forms allocate nothing.
at::Tensor HardswishMeta(const at::Tensor& self) { return at::empty_like(self); }
at::Tensor HardtanhMeta(const at::Tensor& self, const at::Scalar&, const at::Scalar&) { return at::empty_like(self); }
at::Tensor ActivationBackwardMeta(const at::Tensor& grad, const at::Tensor& self) {
  if (grad.sizes() == self.sizes()) return at::empty_like(grad);
  return at::empty(at::infer_size(grad.sizes(), self.sizes()), grad.options());
}
at::Tensor HardswishBackwardMeta(const at::Tensor& grad, const at::Tensor& self) {
  return ActivationBackwardMeta(grad, self);
}
at::Tensor HardtanhBackwardMeta(const at::Tensor& grad, const at::Tensor& self, const at::Scalar&,
                                const at::Scalar&) {
  return ActivationBackwardMeta(grad, self);
}

// Dropout's mask draw (at::dropout on cpu and meta: empty_like(input).bernoulli_(1 - p)): in place,
// no allocation on cpu.
at::Tensor& BernoulliScalarInplaceMeta(at::Tensor& self, double p, std::optional<at::Generator>) {
  TORCH_CHECK(p >= 0 && p <= 1, "bernoulli_ expects p in [0, 1], but got p=", p);
  return self;
}
at::Tensor& BernoulliTensorInplaceMeta(at::Tensor& self, const at::Tensor&, std::optional<at::Generator>) {
  return self;
}

// embedding's forward: weight.index_select(0, ids.reshape(-1)).
// roll as cpu's roll_cpu (TensorTransformations.cpp): one dimension is two narrowed views concatenated (the
// result alone); several roll one dimension at a time (roll_common: each intermediate freed after the next).
// PyTorch's only Meta kernel for roll was Python's, so the Python package warned of it (swin_t) and the C++
// tool could not run it.
at::Tensor RollMeta(const at::Tensor& self, c10::IntArrayRef shifts, c10::IntArrayRef dims) {
  if (dims.size() != 1 || shifts.size() != 1) {  // TensorTransformations.h's roll_common
    TORCH_CHECK(!shifts.empty(), "`shifts` required");
    if (dims.empty() && shifts.size() == 1) {
      return at::roll(self.contiguous().view(self.numel()), {shifts[0]}, {0}).view(self.sizes());
    }
    TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
                ", dims:", dims.size());
    const at::Tensor first_dim_rolled = at::roll(self, {shifts[0]}, {dims[0]});
    return at::roll(first_dim_rolled, shifts.slice(1), dims.slice(1));
  }
  if (self.numel() == 0) return self.clone(at::MemoryFormat::Preserve);
  const int64_t dim = at::maybe_wrap_dim(dims[0], self.dim());
  const int64_t size = self.size(dim);
  int64_t start = (size - shifts[0]) % size;
  if (start < 0) start += size;
  return at::cat({self.narrow(dim, start, size - start), self.narrow(dim, 0, start)}, dim);
}

at::Tensor IndexSelectMeta(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim() == 0 ? 1 : self.dim());
  std::vector<int64_t> sizes = self.sizes().vec();
  if (!sizes.empty()) sizes[static_cast<size_t>(d)] = index.numel();
  return at::empty(sizes, self.options());
}

// cuda (Embedding.cu, embedding_dense_backward_cuda): indices and grad contiguous; up to 3072 indices
// (no scale_grad_by_freq) zeros [num_weights, dim] and a kernel. Beyond, the indices are sorted:
// sorted_indices and orig_indices like the indices, arange(n) for the sort (dead after it), counts for
// scale_grad_by_freq, then EmbeddingBackwardKernel.cu's embedding_backward_cuda_kernel: grad_weight
// zeros, segment_offsets [n], a 0-dim int64, partials_per_segment and its offsets [min(n, V)], another
// 0-dim int64, partial_segment_offset [n / NROWS_PER_THREAD (10) + min(n, V)], and the two-pass path's
// grad_weight_per_segment [that, dim] in the opmath dtype (float for bf16/fp16), freed on return; or,
// where sum_and_scatter's grid, ceil(min(n, V) x dim rounded up to 32 / min(that, 1024)), is under 4
// blocks a card SM (MAX_ATOMIC_ACCUM_BLOCKS_PER_SM) and a quarter of the partial segments, and
// deterministic algorithms are off (use_fused_kernel, EmbeddingBackwardKernel.cu lines 375-381 of
// pytorch main as of torch 2.11), the fused atomic path: partial_to_segment_idx [n / 10 + min(n, V)]
// and, for bf16/fp16, a float accumulator zeros [V, dim] copied into grad_weight (lines 389-443). The
// sizes do not depend on the indices' values. Not modelled: CUB's temporary storage for the sort and
// scans.
at::Tensor EmbeddingDenseBackwardCuda(const at::Tensor& grad_in, const at::Tensor& indices_in, int64_t num_weights,
                                      bool scale_grad_by_freq) {
  const at::Tensor indices = indices_in.contiguous();
  const int64_t n = indices.numel();
  const at::Tensor grad = grad_in.contiguous().view({n, grad_in.size(-1)});
  if (n <= 3072 && !scale_grad_by_freq) return at::zeros({num_weights, grad_in.size(-1)}, grad_in.options());
  NoteKernelWarning(
      "embedding backward: CUB's temporary storage for sorting the indices (Embedding.cu, radix_sort_pairs and "
      "the segment scans) is not modelled");
  const at::Tensor sorted_indices = at::empty_like(indices, at::MemoryFormat::Contiguous);
  const at::Tensor orig_indices = at::empty_like(indices, at::MemoryFormat::Contiguous);
  { const at::Tensor range = at::arange(n, indices.options()); }
  at::Tensor count;
  if (scale_grad_by_freq) count = at::empty_like(indices, at::MemoryFormat::Contiguous);
  at::Tensor grad_weight = at::zeros({num_weights, grad_in.size(-1)}, grad_in.options());
  const at::Tensor segment_offsets = at::empty({n}, indices.options());
  const at::Tensor num_of_segments = at::empty({}, indices.options().dtype(at::kLong));
  const int64_t max_segments = std::min(n, num_weights);
  const at::Tensor partials_per_segment = at::empty({max_segments}, indices.options());
  const at::Tensor partials_per_segment_offset = at::empty({max_segments}, indices.options());
  const at::Tensor num_of_partial_segments = at::empty({}, indices.options().dtype(at::kLong));
  const int64_t max_partial_segment = n / 10 + max_segments;
  const at::Tensor partial_segment_offset = at::empty({max_partial_segment}, indices.options());
  const KernelTarget& card = CurrentKernelTarget();
  const int64_t stride_warped = (grad_weight.stride(0) + card.device.warp_size - 1) / card.device.warp_size *
                                card.device.warp_size;
  const int64_t block = std::min<int64_t>(stride_warped, 1024);
  const int64_t sum_scatter_grid = (max_segments * stride_warped + block - 1) / block;
  const bool fused = sum_scatter_grid < card.device.sm_count * 4 && max_partial_segment > sum_scatter_grid * 4 &&
                     !at::globalContext().deterministicAlgorithms();
  if (fused) {
    const at::Tensor partial_to_segment_idx = at::empty({max_partial_segment}, indices.options());
    if (meta_kernels::OpMathOptions(grad_in).dtype() != grad_in.dtype()) {
      (void)at::zeros({num_weights, grad_weight.stride(0)}, meta_kernels::OpMathOptions(grad_in));
    }
    return grad_weight;
  }
  const at::Tensor grad_weight_per_segment =
      at::empty({max_partial_segment, grad_weight.stride(0)}, meta_kernels::OpMathOptions(grad_in));
  return grad_weight;
}

// cpu: grad.contiguous() (a copy when grad is not contiguous), then zeros [num_weights, dim].
at::Tensor EmbeddingDenseBackwardMeta(const at::Tensor& grad, const at::Tensor& indices, c10::SymInt num_weights,
                                      c10::SymInt padding_idx, bool scale_grad_by_freq) {
  if (CurrentKernelTarget().cuda()) {
    return EmbeddingDenseBackwardCuda(grad, indices, num_weights.expect_int(), scale_grad_by_freq);
  }
  at::Tensor grad_weight = at::empty_symint({num_weights, grad.sym_size(-1)}, grad.options());
  at::Tensor contiguous = grad.contiguous();
  // cpu allocates grad_weight first and the contiguous copy after; the copy dies with the call.
  if (scale_grad_by_freq) (void)at::empty({num_weights.expect_int()}, indices.options());  // the counts
  return grad_weight;
}

// Note [Flash attention on meta]: the cpu flash kernel (ATen/native/cpu/FlashAttentionKernel.cpp)
// splits queries into blocks of 32, 64 or 256 rows (by sequence length) and keys into blocks of 512,
// and keeps per-thread scratch sized by those blocks. The mirror assumes no oneDNN packing, which the
// cpu kernel does only for float16 on CPUs with AMX-FP16.
int64_t FlashQueryBlock(int64_t q_seq_len) { return q_seq_len >= 768 ? 256 : q_seq_len >= 192 ? 64 : 32; }
constexpr int64_t kFlashKeyBlock = 512;

// cpu: output like the query, logsumexp [B, S, H] in the accumulation dtype (returned as [B, H, S]),
// then scratch [threads, qk + max + sum + dst] in that dtype and [threads, q block, k block] in the
// query's dtype for bfloat16/float16.
std::tuple<at::Tensor, at::Tensor> FlashAttentionForCpuMeta(const at::Tensor& query, const at::Tensor& key,
                                                            const at::Tensor& value, double dropout_p, bool is_causal,
                                                            const std::optional<at::Tensor>& attn_mask,
                                                            std::optional<double> scale) {
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "_scaled_dot_product_flash_attention_for_cpu: expected [batch, heads, seq, head_dim] inputs");
  const int64_t batch = query.size(0), heads = query.size(1), q_len = query.size(2), head_dim = query.size(3);
  const int64_t kv_len = key.size(2);
  const at::ScalarType accumulate = at::toOpMathType(query.scalar_type());
  const bool reduced = accumulate != query.scalar_type();
  at::Tensor output = at::empty_like(query);
  at::Tensor logsumexp = at::empty({batch, q_len, heads}, query.options().dtype(accumulate));
  const int64_t q_block = std::min(FlashQueryBlock(q_len), q_len);
  const int64_t kv_block = std::min(kFlashKeyBlock, kv_len);
  const int64_t threads = at::get_num_threads();
  at::Tensor scratch =
      at::empty({threads, q_block * kv_block + 2 * q_block + q_block * head_dim}, query.options().dtype(accumulate));
  at::Tensor scratch_reduced = at::empty({threads, q_block, reduced ? kv_block : 0}, query.options());
  return {output, logsumexp.transpose(1, 2)};
}

// cpu: the three gradients (zeros, [B, S, H, D] transposed back), grad_out in [B, S, H, D] made
// contiguous (a copy unless it already is), then scratch [threads, 2 x q block x k block] (plus the
// reduced-dtype copy) and one [q block] row-sum buffer per thread that works.
std::tuple<at::Tensor, at::Tensor, at::Tensor> FlashAttentionForCpuBackwardMeta(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, double dropout_p, bool is_causal,
    const std::optional<at::Tensor>& attn_mask, std::optional<double> scale) {
  const at::Tensor q_t = query.transpose(1, 2), k_t = key.transpose(1, 2), v_t = value.transpose(1, 2);
  at::Tensor grad_q = at::empty(q_t.sizes(), query.options());
  at::Tensor grad_k = at::empty(k_t.sizes(), key.options());
  at::Tensor grad_v = at::empty(v_t.sizes(), value.options());
  at::Tensor grad_out_contiguous = grad_out.transpose(1, 2).contiguous();
  const int64_t q_len = q_t.size(1), kv_len = v_t.size(1);
  const at::ScalarType accumulate = at::toOpMathType(query.scalar_type());
  const bool reduced = accumulate != query.scalar_type();
  const int64_t q_block = std::min(FlashQueryBlock(q_len), q_len);
  const int64_t kv_block = std::min(kFlashKeyBlock, kv_len);
  const int64_t threads = at::get_num_threads();
  at::Tensor scratch = at::empty({threads, 2 * q_block * kv_block}, query.options().dtype(accumulate));
  at::Tensor scratch_reduced = at::empty({threads, reduced ? 2 * q_block * kv_block : 0}, query.options());
  std::vector<at::Tensor> row_sums;
  for (int64_t t = 0; t < std::min(threads, q_t.size(0) * q_t.size(2)); ++t) {
    row_sums.push_back(at::empty({q_block}, query.options().dtype(accumulate)));
  }
  return {grad_q.transpose(1, 2), grad_k.transpose(1, 2), grad_v.transpose(1, 2)};
}

// arange on cpu: an empty result that arange_out resizes to the length, one allocation. Meta's own
// path resizes a meta tensor, which calls no allocator (the Caveat in meta_tracking_allocator.h): a
// decoder's position ids went unseen on meta.
at::Tensor ArangeStartStepMeta(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step,
                               std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                               std::optional<at::Device> device, std::optional<bool>) {
  const bool floating = start.isFloatingPoint() || end.isFloatingPoint() || step.isFloatingPoint();
  const at::ScalarType type = dtype.value_or(floating ? c10::get_default_dtype_as_scalartype() : at::kLong);
  const double first = start.toDouble(), last = end.toDouble(), stride = step.toDouble();
  TORCH_CHECK(stride != 0, "arange: step must be nonzero");
  TORCH_CHECK((stride > 0 && last >= first) || (stride < 0 && last <= first),
              "arange: upper bound and larger bound inconsistent with step sign");
  const auto length = static_cast<int64_t>(std::ceil((last - first) / stride));
  return at::empty({length}, at::TensorOptions().dtype(type).layout(layout).device(device.value_or(at::kMeta)));
}
at::Tensor ArangeStartMeta(const at::Scalar& start, const at::Scalar& end, std::optional<at::ScalarType> dtype,
                           std::optional<at::Layout> layout, std::optional<at::Device> device,
                           std::optional<bool> pin_memory) {
  return ArangeStartStepMeta(start, end, 1, dtype, layout, device, pin_memory);
}
at::Tensor ArangeMeta(const at::Scalar& end, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                      std::optional<at::Device> device, std::optional<bool> pin_memory) {
  return ArangeStartStepMeta(0, end, 1, dtype, layout, device, pin_memory);
}

// cpu (mean_out, ReduceOps.cpp): a bf16 or fp16 mean is computed in float32: the result, a float32
// result, the float32 copy of the input (freed after the sum), then the float32 result is copied into
// the result and freed (the profiler's memory events of x.mean((2, 3)) on a bf16 x). Other dtypes: the
// result only. The divisor is a host scalar (Note [Host scalars]).
at::Tensor MeanDimMeta(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype) {
  const at::ScalarType out_dtype = dtype.value_or(self.scalar_type());
  TORCH_CHECK(at::isFloatingType(out_dtype) || at::isComplexType(out_dtype),
              "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
              "Got: ",
              self.scalar_type());
  // The reduced shape as the structured mean computes it (ReduceOpsUtils.h).
  const at::DimVector sizes =
      at::native::shape_from_dim_mask(self, at::native::make_dim_mask(dim, self.dim()), keepdim);
  at::Tensor result = at::empty(sizes, self.options().dtype(out_dtype));
  // cuda (mean_out's non-cpu branch): mean_stub reduces into the result, accumulating in registers, with
  // Reduce.cuh's scratch where it splits the inputs across blocks.
  if (CurrentKernelTarget().cuda()) {
    meta_kernels::CudaReductionScratch(self, dim, keepdim, out_dtype);
    return result;
  }
  if (out_dtype == at::kHalf || out_dtype == at::kBFloat16) {
    const at::Tensor result32 = at::empty(sizes, self.options().dtype(at::kFloat));
    if (self.scalar_type() != at::kFloat) (void)at::empty(self.sizes(), self.options().dtype(at::kFloat));
  }
  return result;
}

// A GradScaler's step (workload/loop/grad_scaler.h): the cpu kernels work in place on the gradients and the
// scalars, allocating nothing; on meta there are no values to check, unscale or update.
void AmpUnscaleMeta(at::TensorList grads, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  TORCH_CHECK(found_inf.numel() == 1 && inv_scale.numel() == 1,
              "_amp_foreach_non_finite_check_and_unscale_: found_inf and inv_scale must be 1-element tensors");
  (void)grads;
}
at::Tensor& AmpUpdateScaleMeta(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf, double,
                               double, int64_t) {
  TORCH_CHECK(scale.numel() == 1 && growth_tracker.numel() == 1 && found_inf.numel() == 1,
              "_amp_update_scale_: scale, growth_tracker and found_inf must be 1-element tensors");
  return scale;
}

}  // namespace

void RegisterMetaKernels() {
  // A function-local library rather than TORCH_LIBRARY_IMPL: a static initializer in a static
  // library is dropped by the linker when nothing references its object file.
  static torch::Library* library = [] {
    auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__);
    lib->impl("relu", TORCH_FN(ReluMeta));
    lib->impl("relu_", TORCH_FN(ReluInplaceMeta));
    lib->impl("hardswish", TORCH_FN(HardswishMeta));
    lib->impl("hardswish_backward", TORCH_FN(HardswishBackwardMeta));
    lib->impl("hardtanh", TORCH_FN(HardtanhMeta));
    lib->impl("hardtanh_backward", TORCH_FN(HardtanhBackwardMeta));
    lib->impl("bernoulli_.float", TORCH_FN(BernoulliScalarInplaceMeta));
    lib->impl("bernoulli_.Tensor", TORCH_FN(BernoulliTensorInplaceMeta));
    lib->impl("index_select", TORCH_FN(IndexSelectMeta));
    lib->impl("roll", TORCH_FN(RollMeta));
    lib->impl("embedding_dense_backward", TORCH_FN(EmbeddingDenseBackwardMeta));
    lib->impl("_scaled_dot_product_flash_attention_for_cpu", TORCH_FN(FlashAttentionForCpuMeta));
    lib->impl("_scaled_dot_product_flash_attention_for_cpu_backward", TORCH_FN(FlashAttentionForCpuBackwardMeta));
    lib->impl("arange", TORCH_FN(ArangeMeta));
    lib->impl("arange.start", TORCH_FN(ArangeStartMeta));
    lib->impl("arange.start_step", TORCH_FN(ArangeStartStepMeta));
    lib->impl("mean.dim", TORCH_FN(MeanDimMeta));
    lib->impl("_amp_foreach_non_finite_check_and_unscale_", TORCH_FN(AmpUnscaleMeta));
    lib->impl("_amp_update_scale_", TORCH_FN(AmpUpdateScaleMeta));
    return lib;
  }();
  // The families in their own files (backends/meta/kernels/meta_kernels_internal.h); AutogradMeta holds the few
  // composites whose cpu path depends on the device.
  static torch::Library* autograd_library = [] {
    auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::AutogradMeta, __FILE__, __LINE__);
    meta_kernels::RegisterNorm(*library, *lib);
    meta_kernels::RegisterLayerNorm(*library);
    meta_kernels::RegisterDropout(*library, *lib);
    meta_kernels::RegisterPool(*library, *lib);
    meta_kernels::RegisterConv(*library);
    meta_kernels::RegisterAttention(*library, *lib);
    meta_kernels::RegisterTransformer(*library);
    meta_kernels::RegisterResize(*library);
    meta_kernels::RegisterLoss(*library);
    meta_kernels::RegisterLossAutograd(*lib);
    meta_kernels::RegisterSoftmax(*library);
    meta_kernels::RegisterPromote(*library, *lib);
    meta_kernels::RegisterReduce(*library);
    meta_kernels::RegisterMatmul(*library);
    meta_kernels::RegisterRecurrent(*library, *lib);
    return lib;
  }();
  (void)autograd_library;
}

}  // namespace oomguard
