// Reduce.cuh's global scratch for the reductions besides sum and mean (backends/meta/kernels/
// meta_kernels_reduce_ops.cpp, meta_kernels_reduce_moments.cpp): norms, amax, max/argmax with indices,
// prod, any/all, var/std/var_mean. Every split below is one of two setReduceConfig computations
// (Reduce.cuh lines 1032-1177, ported in backends/meta/cuda_reduce_config.cpp), derived once here; only
// sizeof(arg_t), the accumulator each op's .cu file instantiates, differs between the families.
//
// Full reduction of 1,048,576 contiguous elements (kFull): one output, reduction on the fastest
// dimension, vectorised along the input (lines 1098-1104): dim0 = 1048576 / input_vec_size (4, or 2
// for Welford), past 512 either way: block 512 x 1 (set_block_dimension), step_input 512, 2,048 values
// a thread, past the warp split threshold min(1 x 16, 256) (lines 1135-1137). Blocks an SM 1024 / 512 = 2 on a
// T4 (40 SMs): target grid 80; 2048 / 512 = 4 on an A100 (108 SMs): 432; grid 1 (lines 1151-1156).
// ctas_per_output = max(min(target, 2048 / 16 = 128), 2048 / 256 = 8) (lines 1163-1170): 80 on a T4,
// 128 on an A100. Block-x reduced, so global_memory_size (lines 193-202) is sizeof(arg_t) x 1 output x
// ctas: 80 x arg on a T4, 128 x arg on an A100; semaphore_size (lines 204-209) 4 x grid 1 = 4.
//
// Over the rows of [65536, 64] (kRows, a bias gradient's shape): reduction off the fastest dimension,
// vectorised along the output (lines 1105-1108; get_output_vec_size: 64 and the row stride divide by
// 4): dim0 = 64 / 4 = 16, max threads 512 / 4 = 128: block 16 x 8, step_output 16; 65,536 values a
// thread >= min(8 x 16, 256): step_input 8, 8,192 values a thread. Blocks an SM 1024 / 128 = 8 on a T4
// (target 320), 16 on an A100 (1728); grid ceil(16 / 16) = 1; ctas = max(min(target, 8192 / 16 = 512),
// 32): 320 on a T4, 512 on an A100. Not block-x reduced: the buffer is sizeof(arg_t) x 64 outputs x
// ctas x (block_width 16 x output_vec_size 4): 1,310,720 x arg on a T4, 2,097,152 x arg on an A100;
// semaphores 4. The same for bf16 or bool inputs (the strides in elements are the same).
//
// No split (kShort, [64, 1024] over dim 1): vectorised along the input, dim0 = 1024 / 4 = 256 (512 for
// Welford's input_vec_size 2), block 32 x 16, step_input 32: 32 values a thread, under min(16 x 16, 256):
// each warp its own outputs, no global scratch on any card.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/utils/clip_grad.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "backends/meta/kernel_target.h"
#include "backends/meta/meta_item.h"
#include "tests/card_mode_harness.h"

namespace oomguard {
namespace {

using testing::kMeta;
using testing::MeasureOnMeta;

const KernelTarget kT4 = KernelTarget::Cuda(75);
const KernelTarget kA100 = KernelTarget::Cuda(80);
const at::TensorOptions kBf16 = kMeta.dtype(at::kBFloat16);
const std::vector<int64_t> kDim0{0}, kDim1{1};

// The staging buffer plus 4 bytes of semaphores, by the derivations above.
int64_t FullScratch(const KernelTarget& card, int64_t arg) { return (card.device.sm_count == 40 ? 80 : 128) * arg + 4; }
int64_t RowsScratch(const KernelTarget& card, int64_t arg) {
  return (card.device.sm_count == 40 ? 1'310'720 : 2'097'152) * arg + 4;
}

class CardReduceOpsTest : public testing::CardModeTest {};

template <class F>
int64_t PeakOn(const KernelTarget& target, F&& f) {
  ScopedKernelTarget scope(target);
  return MeasureOnMeta(std::forward<F>(f)).peak;
}

// The shapes above, made before each measurement.
struct Inputs {
  at::Tensor full = at::empty({1048576}, kMeta), full_bf16 = at::empty({1048576}, kBf16);
  at::Tensor rows = at::empty({65536, 64}, kMeta), rows_bf16 = at::empty({65536, 64}, kBf16);
  at::Tensor shorts = at::empty({64, 1024}, kMeta), shorts_bf16 = at::empty({64, 1024}, kBf16);
};

// ReduceNormKernel.cu norm_launch_kernel: NormTwoOps<scalar_t, float, out_t> for fp32 and bf16 alike
// (acc float: sizeof(arg_t) 4). clip_grad_norm_'s per-gradient norm (Python: linalg_vector_norm;
// libtorch: Tensor::norm(2), norm.ScalarOpt_dim, which is linalg_vector_norm_out).
TEST_F(CardReduceOpsTest, VectorNormsHoldTheirScratch) {
  const Inputs in;
  for (const KernelTarget& card : {kT4, kA100}) {
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor n = at::linalg_vector_norm(in.full); }), 4 + FullScratch(card, 4));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor n = in.full.norm(2); }), 4 + FullScratch(card, 4));
    // bf16: a bf16 result (2 bytes), still a float accumulator; into float (dtype=) no copy of the input.
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor n = at::linalg_vector_norm(in.full_bf16); }), 2 + FullScratch(card, 4));
    EXPECT_EQ(
        PeakOn(card, [&] { at::Tensor n = at::linalg_vector_norm(in.full_bf16, 2, std::nullopt, false, at::kFloat); }),
        4 + FullScratch(card, 4));
    // Over the rows: a [64] result and the rows' buffer; short rows: the results alone.
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor n = at::linalg_vector_norm(in.rows, 2, kDim0); }),
              256 + RowsScratch(card, 4));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor n = at::linalg_vector_norm(in.rows_bf16, 2, kDim0); }),
              128 + RowsScratch(card, 4));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor n = at::linalg_vector_norm(in.shorts, 2, kDim1); }), 64 * 4);
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor n = at::linalg_vector_norm(in.shorts_bf16, 2, kDim1); }), 64 * 2);
  }
  // A float norm into double casts its input first (make_reduction: self.to(kDouble), 8 MiB) and
  // accumulates in double: 8 x 80 on a T4.
  EXPECT_EQ(PeakOn(kT4, [&] { at::Tensor n = at::linalg_vector_norm(in.full, 2, std::nullopt, false, at::kDouble); }),
            8 + 1048576 * 8 + FullScratch(kT4, 8));
  // cpu's kernels: the result alone.
  EXPECT_EQ(PeakOn(KernelTarget::Cpu(), [&] { at::Tensor n = at::linalg_vector_norm(in.rows, 2, kDim0); }), 256);
}

// ReduceMaxValuesKernel.cu max_values_kernel_cuda_impl: func_wrapper<scalar_t>(MaxNanFunctor<scalar_t>),
// so the accumulator is the input's own type: 4 bytes for fp32, 2 for bf16 (fp8 scaling's amax).
TEST_F(CardReduceOpsTest, AmaxAccumulatesInTheInputsType) {
  const Inputs in;
  for (const KernelTarget& card : {kT4, kA100}) {
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor m = in.rows.amax(0); }), 256 + RowsScratch(card, 4));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor m = in.rows_bf16.amax(0); }), 128 + RowsScratch(card, 2));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor m = in.rows_bf16.amin(0); }), 128 + RowsScratch(card, 2));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor m = in.full_bf16.amax(); }), 2 + FullScratch(card, 2));
    // max() over everything: max_values_kernel_cuda_impl too.
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor m = in.full.max(); }), 4 + FullScratch(card, 4));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor m = in.shorts_bf16.amax(1); }), 64 * 2);
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor m = in.shorts.amax(1); }), 64 * 4);
  }
  // aminmax: MinMaxOps' pair of the input's type, 8 bytes for fp32, 4 for bf16; min and max results.
  for (const KernelTarget& card : {kT4, kA100}) {
    EXPECT_EQ(PeakOn(card, [&] { auto [lo, hi] = at::aminmax(in.rows, 0); }), 2 * 256 + RowsScratch(card, 8));
    EXPECT_EQ(PeakOn(card, [&] { auto [lo, hi] = at::aminmax(in.full_bf16); }), 2 * 2 + FullScratch(card, 4));
    EXPECT_EQ(PeakOn(card, [&] { auto [lo, hi] = at::aminmax(in.shorts_bf16, 1); }), 2 * 128);
  }
  // max() of a strided input reduces self.contiguous(): a copy (4 MiB) first.
  const at::Tensor t = at::empty({1024, 1024}, kMeta).t();
  EXPECT_EQ(PeakOn(kT4, [&] { at::Tensor m = t.max(); }), 4 + 4'194'304 + FullScratch(kT4, 4));
}

// max.dim's MaxOps<scalar_t> and argmax's ArgMaxOps<acc_t> carry a value and an int64 index
// (detail::pair<scalar_t, int64_t>: 16 bytes for fp32 and bf16 alike): four times a float sum's buffer.
TEST_F(CardReduceOpsTest, ValueAndIndexReductionsStageSixteenByteAccumulators) {
  const Inputs in;
  for (const KernelTarget& card : {kT4, kA100}) {
    // values [64] and int64 indices [64].
    EXPECT_EQ(PeakOn(card, [&] { auto [v, i] = in.rows.max(0); }), 256 + 512 + RowsScratch(card, 16));
    EXPECT_EQ(PeakOn(card, [&] { auto [v, i] = in.rows_bf16.min(0); }), 128 + 512 + RowsScratch(card, 16));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor i = in.rows_bf16.argmax(0); }), 512 + RowsScratch(card, 16));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor i = in.shorts.argmax(1); }), 512);
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor i = in.shorts_bf16.argmax(1); }), 512);
  }
  // argmax without a dimension reduces self.reshape({-1}): a transposed [1024, 1024] is copied (4 MiB)
  // first, then the full reduction: the 0-dim int64 result, the copy and 16 x 80 on a T4.
  const at::Tensor t = at::empty({1024, 1024}, kMeta).t();
  EXPECT_EQ(PeakOn(kT4, [&] { at::Tensor i = t.argmax(); }), 8 + 4'194'304 + FullScratch(kT4, 16));
  // A dimension of size 1 fills zeros: no kernel.
  const at::Tensor one = at::empty({1, 1048576}, kMeta);
  EXPECT_EQ(PeakOn(kT4, [&] { at::Tensor i = one.argmax(0); }), 1048576 * 8);
}

// ReduceSumProdKernel.cu prod_functor<scalar_t, acc_t>: float for bf16 (no 8-wide loads: that is
// sum_functor's alone); integers reduce as int64, their input cast first (make_reduction_from_out_ty).
TEST_F(CardReduceOpsTest, ProdAccumulatesInOpmath) {
  const Inputs in;
  for (const KernelTarget& card : {kT4, kA100}) {
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor p = in.rows.prod(0); }), 256 + RowsScratch(card, 4));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor p = in.rows_bf16.prod(0); }), 128 + RowsScratch(card, 4));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor p = in.full_bf16.prod(); }), 2 + FullScratch(card, 4));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor p = in.shorts.prod(1); }), 64 * 4);
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor p = in.shorts_bf16.prod(1); }), 64 * 2);
  }
  // int32 into int64: the result, the int64 copy (8 MiB) and 8 x 80.
  const at::Tensor ints = at::empty({1048576}, kMeta.dtype(at::kInt));
  EXPECT_EQ(PeakOn(kT4, [&] { at::Tensor p = ints.prod(); }), 8 + 1048576 * 8 + FullScratch(kT4, 8));
}

// ReduceLogicKernel.cu and_kernel_cuda/or_kernel_cuda: func_wrapper<bool>(lambda(scalar_t, scalar_t)),
// the accumulator the input's type (1 byte for a mask, 4 for floats, 2 for bf16; the lambda's types are
// libtorch_cuda.so's); no bool copy of the input on a card (get_allany_iter).
TEST_F(CardReduceOpsTest, AnyAndAllReduceInTheInputsType) {
  const Inputs in;
  const at::Tensor mask = at::empty({65536, 64}, kMeta.dtype(at::kBool));
  for (const KernelTarget& card : {kT4, kA100}) {
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor a = mask.any(0); }), 64 + RowsScratch(card, 1));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor a = in.rows_bf16.all(0); }), 64 + RowsScratch(card, 2));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor a = in.full.all(); }), 1 + FullScratch(card, 4));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor a = in.shorts.any(1); }), 64);
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor a = in.shorts_bf16.any(1); }), 64);
  }
}

// ReduceMomentKernel.cu std_var_kernel_impl (Note [Welford's scratch on a card]): WelfordData<float,
// int32_t>, 16 bytes for fp32 and bf16; 32 for double (WelfordData<double, int32_t>, padded).
TEST_F(CardReduceOpsTest, VarianceStagesWelfordAccumulators) {
  const Inputs in;
  const at::Tensor full_f64 = at::empty({1048576}, kMeta.dtype(at::kDouble));
  for (const KernelTarget& card : {kT4, kA100}) {
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor v = in.rows.var(0); }), 256 + RowsScratch(card, 16));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor v = in.rows_bf16.std(0); }), 128 + RowsScratch(card, 16));
    // var_mean: both [64] results.
    EXPECT_EQ(PeakOn(card, [&] { auto [v, m] = at::var_mean(in.rows_bf16, kDim0, /*unbiased=*/true, false); }),
              2 * 128 + RowsScratch(card, 16));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor v = in.full.var(); }), 4 + FullScratch(card, 16));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor v = in.full_bf16.var(); }), 2 + FullScratch(card, 16));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor v = full_f64.var(); }), 8 + FullScratch(card, 32));
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor v = in.shorts.var(1); }), 64 * 4);
    EXPECT_EQ(PeakOn(card, [&] { at::Tensor v = in.shorts_bf16.std(1); }), 64 * 2);
  }
  // cpu's kernels (PyTorch's C++ has no Meta kernel for var at all): an all-reduce of floats is
  // std_var_all_cpu, which makes the 0-dim mean first (4 + 4); a bf16 one and var over rows reduce in
  // registers.
  const KernelTarget cpu = KernelTarget::Cpu();
  EXPECT_EQ(PeakOn(cpu, [&] { at::Tensor v = in.full.var(); }), 4 + 4);
  EXPECT_EQ(PeakOn(cpu, [&] { at::Tensor v = in.full_bf16.var(); }), 2);
  EXPECT_EQ(PeakOn(cpu, [&] { at::Tensor v = in.rows.var(0); }), 256);
  EXPECT_EQ(PeakOn(cpu, [&] { auto [v, m] = at::std_mean(in.rows, kDim0, /*unbiased=*/true, false); }), 2 * 256);
}

// cpu's kernels: ReduceOpsUtils.h make_reduction reads the input in the result's dtype (a cast copy),
// which PyTorch's structured Meta functions leave out; on a card the CUDA ops read a bf16 input into
// float and any dtype into any/all as it is. A float mask's any over [65536, 64]: a bool copy (4 MiB);
// an int32 prod: an int64 copy; a bf16 norm into float: a float copy; argmax of a permuted input with no
// dimension: reshape's contiguous copy. (oomguard's cpu backend measures PyTorch's cpu kernels making
// the same: Python, cpu against meta, equal peaks for each.)
TEST_F(CardReduceOpsTest, CpuKernelsCopyTheirInputsWhereTheResultsDtypeDiffers) {
  const Inputs in;
  const KernelTarget cpu = KernelTarget::Cpu();
  EXPECT_EQ(PeakOn(cpu, [&] { at::Tensor a = in.rows.any(0); }), 64 + 65536 * 64);
  EXPECT_EQ(PeakOn(kT4, [&] { at::Tensor a = in.rows.any(0); }), 64 + RowsScratch(kT4, 4));
  const at::Tensor ints = at::empty({1048576}, kMeta.dtype(at::kInt));
  EXPECT_EQ(PeakOn(cpu, [&] { at::Tensor p = ints.prod(); }), 8 + 1048576 * 8);
  EXPECT_EQ(
      PeakOn(cpu, [&] { at::Tensor n = at::linalg_vector_norm(in.full_bf16, 2, std::nullopt, false, at::kFloat); }),
      4 + 1048576 * 4);
  const at::Tensor permuted = at::empty({64, 64, 64}, kMeta).permute({2, 0, 1});
  EXPECT_EQ(PeakOn(cpu, [&] { at::Tensor i = permuted.argmax(); }), 8 + 64 * 64 * 64 * 4);
  EXPECT_EQ(PeakOn(cpu, [&] { at::Tensor p = in.rows_bf16.prod(0); }), 128);  // bf16 into bf16: no copy
}

// libtorch's clip_grad_norm_ (torch/nn/utils/clip_grad.h: grad.norm(2) per gradient, then
// stack(norms).norm(2)) over the catalog's MLP gradients (scenarios/clip-grad-norm.json: [512, 256],
// [512] x 3, [512, 512], [512], [10, 512], [10]). A full norm splits once it has 256 values a thread
// after the 512-wide block (131,072 values and up; kFull above): [512, 256], 131,072 values: 256 a
// thread, ctas max(min(80 or 432, 256 / 16 = 16), 1) = 16, 4 x 16 = 64 bytes; [512, 512], 512 a thread,
// ctas max(min(80 or 432, 32), 2) = 32: 128 bytes; each with 4 bytes of semaphores. The peak is the
// fifth norm's: the four norms before it (16), its own (4), 128 + 4 of scratch: 152 bytes on a T4 and
// an A100 alike (cpu's kernels: 8 norms, their stack, the total, 68). The catalog's claim that clipping
// costs 68 bytes is cpu's; a GPU's Reduce.cuh kernels add this.
TEST_F(CardReduceOpsTest, LibTorchClipGradNormHoldsTheLargestGradientsScratch) {
  std::vector<at::Tensor> params;
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{512, 256}, {512}, {512}, {512}, {512, 512}, {512}, {10, 512}, {10}}) {
    at::Tensor p = at::empty(shape, kMeta);
    p.mutable_grad() = at::empty(shape, kMeta);
    params.push_back(p);
  }
  const auto clip = [&] {
    MetaItemScope values;  // the returned norm's item() reads 0 on meta
    torch::nn::utils::clip_grad_norm_(params, 1.0);
  };
  EXPECT_EQ(PeakOn(kT4, clip), 4 * 4 + 4 + 128 + 4);
  EXPECT_EQ(PeakOn(kA100, clip), 4 * 4 + 4 + 128 + 4);
  EXPECT_EQ(PeakOn(KernelTarget::Cpu(), clip), 8 * 4 + 8 * 4 + 4);
}

}  // namespace
}  // namespace oomguard
