// Batch norm and group norm on a card (`--kernels cuda`, backends/meta/kernels/meta_kernels_norm_cuda.h):
// the CUDA kernels' outputs and the transients they free on return, each expectation derived by hand
// from the PyTorch 2.11 source its kernel cites (group_norm_kernel.cu, cuda/Normalization.cu and .cuh,
// cudnn/BatchNorm.cpp, Normalization.cpp's _select_batch_norm_backend).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "allocators/install.h"
#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels.h"

namespace oomguard {
namespace {

const at::TensorOptions kMeta = at::TensorOptions().device(at::kMeta);
const at::TensorOptions kF32 = kMeta.dtype(at::kFloat);
const at::TensorOptions kBf16 = kMeta.dtype(at::kBFloat16);
const KernelTarget kT4 = KernelTarget::Cuda(75);

class CardNormTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterMetaKernels();
    (void)TakeKernelWarnings();
  }
};

// What `f` leaves live (the tensors it returns) and its highest live bytes, above the start, on a T4.
struct Bytes {
  int64_t left = 0;
  int64_t peak = 0;
};
template <class F>
Bytes OnCard(F&& f, const KernelTarget& target = kT4) {
  ScopedKernelTarget scope(target);
  Ledger& ledger = MetaAccount().ledger();
  ledger.ResetStatistics();
  const int64_t before = ledger.live_bytes();
  Bytes bytes;
  {
    const std::vector<at::Tensor> kept = f();
    bytes.left = ledger.live_bytes() - before;
  }
  bytes.peak = ledger.Snapshot().peak_bytes - before;
  return bytes;
}
template <class... T>
std::vector<at::Tensor> All(const std::tuple<T...>& t) {
  return std::apply([](const auto&... x) { return std::vector<at::Tensor>{x...}; }, t);
}
bool Said(const std::vector<std::string>& warnings, const std::string& part) {
  return std::any_of(warnings.begin(), warnings.end(),
                     [&](const std::string& w) { return w.find(part) != std::string::npos; });
}

// Group norm, X bf16 [N=2, C=8, 4, 4], G = 2: Y 2*8*16*2 = 512 B, mean and rstd [2, 2] bf16 8 B each
// (group_norm.cpp: X's dtype); GroupNormKernelImplInternal's a and b [N, C] float, 64 B each, freed.
TEST_F(CardNormTest, GroupNormForwardBooksFloatScaleAndShift) {
  const at::Tensor x = at::empty({2, 8, 4, 4}, kBf16), w = at::empty({8}, kBf16), b = at::empty({8}, kBf16);
  const Bytes affine = OnCard([&] { return All(at::native_group_norm(x, w, b, 2, 8, 16, 2, 1e-5)); });
  EXPECT_EQ(affine.left, 512 + 2 * 8);
  EXPECT_EQ(affine.peak, 512 + 2 * 8 + 2 * 64);
  // No gamma nor beta: the kernel normalizes with mean and rstd directly.
  EXPECT_EQ(OnCard([&] { return All(at::native_group_norm(x, {}, {}, 2, 8, 16, 2, 1e-5)); }).peak, 528);
  // HxW = 1 (GroupNorm1dForward): views only. X [2, 8]: Y 32 B, mean and rstd 8 B each.
  const at::Tensor x1 = at::empty({2, 8}, kBf16);
  EXPECT_EQ(OnCard([&] { return All(at::native_group_norm(x1, w, b, 2, 8, 1, 2, 1e-5)); }).peak, 32 + 16);
}

// GroupNormBackwardKernelImplInternal, same X and dY: dX 512 B, dgamma and dbeta [8] bf16 16 B each
// (left 544); ds and db [2, 8] float 64 B each, c2 and c3 [2, 2] float 16 B each, c1 rstd x gamma
// [2, 2, 4] float 64 B, all freed.
TEST_F(CardNormTest, GroupNormBackwardBooksItsTransients) {
  const at::Tensor x = at::empty({2, 8, 4, 4}, kBf16), dy = at::empty({2, 8, 4, 4}, kBf16);
  const at::Tensor w = at::empty({8}, kBf16), stat = at::empty({2, 2}, kBf16);
  const Bytes all = OnCard([&] {
    return All(at::native_group_norm_backward(dy, x, stat, stat, w, 2, 8, 16, 2, {true, true, true}));
  });
  EXPECT_EQ(all.left, 544);
  EXPECT_EQ(all.peak, 544 + 128 + 32 + 64);
  // No gamma: no c1; dX, then ds, db, c2, c3.
  EXPECT_EQ(OnCard([&] {
              return All(at::native_group_norm_backward(dy, x, stat, stat, {}, 2, 8, 16, 2, {true, false, false}));
            }).peak,
            512 + 128 + 32);
  // HxW = 1, X [4, 8]: dX 64 B, dgamma and dbeta 32 B; ds and db [4, 8] float 128 B each (made before
  // the 1-d branch), c2 and c3 [4, 2] float 32 B each.
  const at::Tensor x1 = at::empty({4, 8}, kBf16), stat1 = at::empty({4, 2}, kBf16);
  EXPECT_EQ(OnCard([&] {
              return All(at::native_group_norm_backward(x1, x1, stat1, stat1, w, 4, 8, 1, 2, {true, true, true}));
            }).peak,
            64 + 32 + 256 + 64);
}

// The CUDA kernels read float parameters of a bf16 X as bf16 (data_ptr's dtype check stops them); cpu
// runs the mixed types.
TEST_F(CardNormTest, GroupNormOnACardRefusesFloatParametersForBf16) {
  const at::Tensor x = at::empty({2, 8, 4, 4}, kBf16), w = at::empty({8}, kF32);
  ScopedKernelTarget cuda(kT4);
  EXPECT_THROW((void)at::native_group_norm(x, w, w, 2, 8, 16, 2, 1e-5), c10::Error);
  ScopedKernelTarget cpu(KernelTarget::Cpu());
  EXPECT_NO_THROW((void)at::native_group_norm(x, w, w, 2, 8, 16, 2, 1e-5));
}

// _select_batch_norm_backend on a card: cuDNN for fp32 (and fp64) inputs and fp16 ones with float
// parameters, with weight and bias, running statistics (or none, training), 3 to 5 dims and a batch
// up to 880,801 (training) or 65,535 (evaluation), unless cuDNN is turned off; cpu's kernels keep
// native_batch_norm.
TEST_F(CardNormTest, BatchNormTakesCudnnWhereACardDoes) {
  const auto backward_of = [](at::TensorOptions x_options, at::TensorOptions p_options, std::vector<int64_t> shape,
                              bool affine, bool training, const KernelTarget& target = kT4) {
    ScopedKernelTarget scope(target);
    const at::Tensor x = at::empty(shape, x_options).requires_grad_(true);
    const at::Tensor w = affine ? at::empty({shape[1]}, p_options) : at::Tensor();
    const at::Tensor stats = at::empty({shape[1]}, p_options);
    return at::batch_norm(x, w, w, stats, stats, training, 0.1, 1e-5, true).grad_fn()->name();
  };
  const std::vector<int64_t> image{2, 8, 4, 4};
  EXPECT_EQ(backward_of(kF32, kF32, image, true, true), "CudnnBatchNormBackward0");
  EXPECT_EQ(backward_of(kF32, kF32, image, true, false), "CudnnBatchNormBackward0");
  EXPECT_EQ(backward_of(kMeta.dtype(at::kHalf), kF32, image, true, true), "CudnnBatchNormBackward0");
  EXPECT_EQ(backward_of(kMeta.dtype(at::kHalf), kMeta.dtype(at::kHalf), image, true, true), "NativeBatchNormBackward0");
  EXPECT_EQ(backward_of(kBf16, kF32, image, true, true), "NativeBatchNormBackward0");
  EXPECT_EQ(backward_of(kF32, kF32, image, false, true), "NativeBatchNormBackward0");
  EXPECT_EQ(backward_of(kF32, kF32, {2, 8}, true, true), "NativeBatchNormBackward0");
  EXPECT_EQ(backward_of(kF32, kF32, {880801, 1, 1}, true, true), "CudnnBatchNormBackward0");
  EXPECT_EQ(backward_of(kF32, kF32, {880802, 1, 1}, true, true), "NativeBatchNormBackward0");
  EXPECT_EQ(backward_of(kF32, kF32, {65536, 1, 1}, true, false), "NativeBatchNormBackward0");
  EXPECT_EQ(backward_of(kF32, kF32, image, true, true, KernelTarget::Cpu()), "NativeBatchNormBackward0");
  at::globalContext().setUserEnabledCuDNN(false);  // torch.backends.cudnn.enabled = False
  EXPECT_EQ(backward_of(kF32, kF32, image, true, true), "NativeBatchNormBackward0");
  at::globalContext().setUserEnabledCuDNN(true);
}

// _batch_norm_with_update_cuda and _new_batch_norm_backward_cuda (torch.compile's and export's batch
// norm) ask _select_batch_norm_backend too: cuDNN's for fp32 (its warning), batch_norm_cuda's for bf16,
// with the same bytes here: output 1,024 B (fp32) or 512 B (bf16), two float [8] and an empty reserve.
TEST_F(CardNormTest, BatchNormWithUpdateOnACardPicksItsBackendToo) {
  for (const at::TensorOptions& options : {kF32, kBf16}) {
    const at::Tensor x = at::empty({2, 8, 4, 4}, options), w = at::empty({8}, options);
    at::Tensor mean = at::empty({8}, options), var = at::empty({8}, options);
    const Bytes bytes = OnCard([&] { return All(at::_batch_norm_with_update(x, w, w, mean, var, 0.1, 1e-5)); });
    EXPECT_EQ(bytes.left, 32 * 8 * x.element_size() + 64);
    EXPECT_EQ(Said(TakeKernelWarnings(), "reserve space"), options.dtype() == at::kFloat);
    const at::Tensor reserve = at::empty({0}, kMeta.dtype(at::kByte)), save = at::empty({8}, kF32);
    (void)OnCard([&] {
      return All(at::batch_norm_backward(x, x, w, mean, var, save, save, true, 1e-5, {true, true, true}, reserve));
    });
    EXPECT_EQ(Said(TakeKernelWarnings(), "reserve space"), options.dtype() == at::kFloat);
  }
}

// cudnn_batch_norm, fp32 [2, 8, 4, 4] (1,024 B): training makes the output, save_mean and save_var [8]
// float (32 B each) and an empty reserve (Note [cuDNN's batch norm reserve space is not modelled]),
// which the warnings name; evaluation the output and empty statistics.
TEST_F(CardNormTest, CudnnBatchNormBooksItsOutputsAndSaysTheReserveIsNot) {
  const at::Tensor x = at::empty({2, 8, 4, 4}, kF32), w = at::empty({8}, kF32);
  const Bytes train = OnCard([&] { return All(at::cudnn_batch_norm(x, w, w, w, w, true, 0.1, 1e-5)); });
  EXPECT_EQ(train.left, 1024 + 64);
  EXPECT_EQ(train.peak, 1024 + 64);
  EXPECT_TRUE(Said(TakeKernelWarnings(), "reserve space"));
  EXPECT_EQ(OnCard([&] { return All(at::cudnn_batch_norm(x, w, w, w, w, false, 0.1, 1e-5)); }).peak, 1024);
  // The backward of a channels-last input: grad_output made channels last (a 1,024 B copy, freed),
  // grad_input channels last, grad_weight and grad_bias [8] float.
  const at::Tensor x_cl = x.contiguous(at::MemoryFormat::ChannelsLast), dy = at::empty({2, 8, 4, 4}, kF32);
  at::Tensor grad_input;
  const Bytes backward = OnCard([&] {
    const auto out =
        at::cudnn_batch_norm_backward(x_cl, dy, w, w, w, w, w, 1e-5, at::empty({0}, kMeta.dtype(at::kByte)));
    grad_input = std::get<0>(out);
    return All(out);
  });
  EXPECT_EQ(backward.peak, 1024 + 1024 + 64);
  EXPECT_EQ(backward.left, 1024 + 64);
  EXPECT_TRUE(grad_input.is_contiguous(at::MemoryFormat::ChannelsLast));
}

// batch_norm_stats_channels_last_cuda_template, bf16 [2, 8, 64, 64] channels last (Note [A card's batch
// norm reductions]): reduction 2*64*64 = 8192, stride 8; block (8, min(lastPow2(8192/16) = 512, 512/8))
// = (8, 64), grid (1, ceil(8192 / (64 * 16)) = 8), 8 rows kept: staging [4 * 8 * 8] float 1,024 B and
// semaphores [1] int32 4 B, freed. The output 131,072 B, save_mean and save_invstd [8] float 32 B each.
TEST_F(CardNormTest, ChannelsLastBatchNormStagesItsStatistics) {
  const at::Tensor w = at::empty({8}, kBf16);
  const auto forward = [&](const at::Tensor& x) {
    return OnCard([&] { return All(at::native_batch_norm(x, w, w, {}, {}, true, 0.1, 1e-5)); });
  };
  const at::Tensor x = at::empty({2, 8, 64, 64}, kBf16);
  const Bytes channels_last = forward(x.contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_EQ(channels_last.left, 131072 + 64);
  EXPECT_EQ(channels_last.peak, 131072 + 64 + 1024 + 4);
  EXPECT_EQ(forward(x).peak, 131072 + 64);  // the contiguous kernel reduces per channel in one block
  // [2, 8, 32, 64]: reduction 4096, grid.y = 4, under 8: one row of blocks, no staging.
  const at::Tensor half_x = at::empty({2, 8, 32, 64}, kBf16).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_EQ(forward(half_x).peak, 65536 + 64);
}

// batch_norm_backward_cuda, same channels-last input and grad_out, training: not the fused kernel;
// batch_norm_backward_reduce_cuda_channels_last_template makes sum_dy and sum_dy_xmu [8] float (32 B
// each), grad_weight and grad_bias [8] bf16 (16 B each, whatever the mask), staging [2 * 8 * 8] float
// 512 B and semaphores 4 B (freed on return), then grad_input channels last (131,072 B).
TEST_F(CardNormTest, ChannelsLastBatchNormBackwardStagesItsReduction) {
  const at::Tensor x = at::empty({2, 8, 64, 64}, kBf16).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor w = at::empty({8}, kBf16), save = at::empty({8}, kF32);
  const auto backward = [&](std::array<bool, 3> mask) {
    return OnCard([&] { return All(at::native_batch_norm_backward(x, x, w, {}, {}, save, save, true, 1e-5, mask)); });
  };
  const Bytes all = backward({true, true, true});
  EXPECT_EQ(all.left, 131072 + 32);
  EXPECT_EQ(all.peak, 64 + 32 + 131072);  // above the reduction's 64 + 32 + 512 + 4
  EXPECT_EQ(backward({true, false, false}).left, 131072 + 32);
}

// The fused kernel (batch_norm_backward_cuda_template), a contiguous bf16 [2, 8, 4, 4] input: grad_out
// reshaped to [N, C, -1], a view of a contiguous or channels-last one (H and W merge), a 512 B copy
// (freed) of one whose H and W are swapped in memory; then grad_input 512 B and grad_weight, grad_bias
// [8] bf16.
TEST_F(CardNormTest, FusedBatchNormBackwardCopiesAGradientItCannotView) {
  const at::Tensor x = at::empty({2, 8, 4, 4}, kBf16), w = at::empty({8}, kBf16), save = at::empty({8}, kF32);
  const auto backward = [&](const at::Tensor& dy) {
    return OnCard([&] {
      return All(at::native_batch_norm_backward(dy, x, w, {}, {}, save, save, true, 1e-5, {true, true, true}));
    });
  };
  EXPECT_EQ(backward(at::empty({2, 4, 4, 8}, kBf16).permute({0, 3, 2, 1})).peak, 512 + 512 + 32);
  EXPECT_EQ(backward(x.contiguous(at::MemoryFormat::ChannelsLast)).peak, 512 + 32);
  EXPECT_EQ(backward(x).peak, 512 + 32);
}

// After cuDNN's evaluation forward (empty save_mean and save_var), the eval backward of a channels-last
// fp32 [2, 8, 4, 4] input: mean is running_mean (already float), invstd [8] float computed (32 B,
// freed); the channels-last reduction's sum_dy, sum_dy_xmu, grad_weight, grad_bias [8] float (reduction
// 32: grid.y 1, no staging); grad_input contiguous 1,024 B (batch_norm_elementwise_backward_eval).
TEST_F(CardNormTest, EvalBatchNormBackwardAfterCudnnComputesInvstd) {
  const at::Tensor x = at::empty({2, 8, 4, 4}, kF32).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor w = at::empty({8}, kF32), empty = at::empty({0}, kF32);
  at::Tensor grad_input;
  const Bytes eval = OnCard([&] {
    const auto out = at::native_batch_norm_backward(x, x, w, w, w, empty, empty, false, 1e-5, {true, true, true});
    grad_input = std::get<0>(out);
    return All(out);
  });
  EXPECT_EQ(eval.left, 1024 + 64);
  EXPECT_EQ(eval.peak, 32 + 4 * 32 + 1024);
  EXPECT_TRUE(grad_input.is_contiguous());
}

// Channels-last 3d: batch_norm_choose_impl's General path; its statistics are var_mean_out's Welford
// reduction (Reduce.cuh), and its backward's grad_input keeps the input's format. [2, 8, 2, 4, 4]: 64
// values a channel, no split. [8, 64, 16, 32, 32] (channels-last 3d strides C 1, W 64, H 2,048, D
// 65,536, N 1,048,576): N, D, H and W are reduced and coalesce into one dimension of 131,072 rows of
// stride 64 elements, C kept: the rows layout of tests/card_reduce_ops_test.cpp (outputs vectorised by
// 4, block 16 x 8, step_input 8: 16,384 values a thread), ctas max(min(320, 16384 / 16 = 1024), 64) = 320
// on a T4 and min(1728, 1024) = 1024 on an A100; WelfordData<float, int32_t> (16 bytes) x 64 channels x
// ctas x (16 x 4): 20,971,520 bytes on a T4, 67,108,864 on an A100, plus 4 bytes of semaphores, while the
// output (like the input) and save_mean and save_invstd ([64] floats) are live. bf16: the same float
// statistics and scratch, a bf16 output.
TEST_F(CardNormTest, ChannelsLast3dBatchNormStagesItsWelfordReduction) {
  const at::Tensor x = at::empty({2, 8, 2, 4, 4}, kF32).contiguous(at::MemoryFormat::ChannelsLast3d);
  const at::Tensor w = at::empty({8}, kF32);
  ScopedKernelTarget cuda(kT4);
  const auto [y, mean, invstd] = at::native_batch_norm(x, w, w, {}, {}, true, 0.1, 1e-5);
  const auto grads = at::native_batch_norm_backward(y, x, w, {}, {}, mean, invstd, true, 1e-5, {true, true, true});
  EXPECT_TRUE(std::get<0>(grads).is_contiguous(at::MemoryFormat::ChannelsLast3d));
  for (const at::TensorOptions& options : {kF32, kBf16}) {
    const at::Tensor big = at::empty({8, 64, 16, 32, 32}, options).contiguous(at::MemoryFormat::ChannelsLast3d);
    const at::Tensor w64 = at::empty({64}, kF32);
    const int64_t output = big.numel() * big.element_size();
    const auto forward = [&] { return All(at::native_batch_norm(big, w64, w64, {}, {}, true, 0.1, 1e-5)); };
    EXPECT_EQ(OnCard(forward, kT4).peak, output + 2 * 256 + 20'971'520 + 4);
    EXPECT_EQ(OnCard(forward, KernelTarget::Cuda(80)).peak, output + 2 * 256 + 67'108'864 + 4);
  }
}

}  // namespace
}  // namespace oomguard
