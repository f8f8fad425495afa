// Losses as a card allocates them (Note [Losses on a card], backends/meta/kernels/meta_kernels_loss.cpp):
// cross entropy's log_softmax, nll_loss and nll_loss2d, mse_loss, binary cross entropy (with and without
// logits), smooth L1, Huber, L1 and KL divergence, forward and backward, against what cpu's kernels
// allocate. Each expectation is derived from PyTorch 2.11's CUDA host code (and Loss.cpp's cpu code).
#include <ATen/ATen.h>
#include <ATen/core/Reduction.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "backends/meta/kernel_target.h"
#include "tests/card_mode_harness.h"

namespace oomguard::testing {
namespace {

const KernelTarget kT4 = KernelTarget::Cuda(75);
const KernelTarget kCpu = KernelTarget::Cpu();
using CardLoss = CardModeTest;

int64_t Bytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// Cross entropy as the catalog computes it: log_softmax over the class dim, then nll_loss ([N, C]
// logits) or nll_loss2d ([N, C, H, W]). Forward: the log-probabilities (like the logits) and two scalars
// in their dtype, the loss and total_weight (SoftMax.cu's host_softmax, Loss.cu's and NLLLoss2d.cu's
// templates; the inputs are contiguous, so no copies). Backward: nll's grad_input (zeroed) and
// log_softmax's grad_input, each like the logits. The same on cpu, in fp32, bf16 and fp16.
TEST_F(CardLoss, CrossEntropyOnACardAllocatesAsOnCpu) {
  const std::vector<std::vector<int64_t>> shapes = {{64, 10}, {2, 5, 8, 8}};
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (const std::vector<int64_t>& shape : shapes) {
      SCOPED_TRACE(::testing::Message() << dtype << " " << at::IntArrayRef(shape));
      const at::Tensor logits = at::empty(shape, kMeta.dtype(dtype));
      std::vector<int64_t> target_shape = shape;
      target_shape.erase(target_shape.begin() + 1);
      const at::Tensor target = at::zeros(target_shape, kMeta.dtype(at::kLong));
      const int64_t scalar = static_cast<int64_t>(logits.element_size());
      at::Tensor logp, loss, total_weight;
      const auto forward = [&] {
        logp = at::_log_softmax(logits, 1, false);
        std::tie(loss, total_weight) = shape.size() == 2
                                           ? at::nll_loss_forward(logp, target, {}, at::Reduction::Mean, -100)
                                           : at::nll_loss2d_forward(logp, target, {}, at::Reduction::Mean, -100);
      };
      const auto backward = [&] {
        const at::Tensor grad = at::ones({}, logits.options());
        const at::Tensor grad_logp =
            shape.size() == 2
                ? at::nll_loss_backward(grad, logp, target, {}, at::Reduction::Mean, -100, total_weight)
                : at::nll_loss2d_backward(grad, logp, target, {}, at::Reduction::Mean, -100, total_weight);
        at::Tensor grad_logits = at::_log_softmax_backward_data(grad_logp, logp, 1, dtype);
      };
      for (const KernelTarget& target_kernels : {kT4, kCpu}) {
        logp = loss = total_weight = at::Tensor();  // the other kernels' forward, freed first
        const Measured f = MeasureWithKernels(target_kernels, forward);
        EXPECT_EQ(f.allocated, Bytes(logits) + 2 * scalar);
        EXPECT_EQ(f.live, Bytes(logits) + 2 * scalar);
        const Measured b = MeasureWithKernels(target_kernels, backward);
        EXPECT_EQ(b.allocated, scalar + 2 * Bytes(logits));  // the seed gradient, two grad_inputs
        EXPECT_EQ(b.peak, scalar + 2 * Bytes(logits));
      }
    }
  }
}

// The whole composite (F.cross_entropy: cross_entropy_loss -> log_softmax -> nll_loss_nd), with
// autograd recording for a [64, 10] bf16 leaf: the same on a card as on cpu, log-probabilities (1280
// bytes) and two bf16 scalars kept.
TEST_F(CardLoss, CrossEntropyCompositeKeepsTheSameOnACard) {
  const at::Tensor logits = at::empty({64, 10}, kMeta.dtype(at::kBFloat16)).requires_grad_(true);
  const at::Tensor target = at::zeros({64}, kMeta.dtype(at::kLong));
  at::Tensor loss;
  const auto step = [&] { loss = at::cross_entropy_loss(logits, target); };
  const Measured card = MeasureWithKernels(kT4, step);
  EXPECT_EQ(card.live, 1280 + 2 + 2);
  loss = at::Tensor();  // and the graph that kept the card's
  const Measured cpu = MeasureWithKernels(kCpu, step);
  EXPECT_EQ(cpu.live, card.live);
  EXPECT_EQ(cpu.peak, card.peak);
  EXPECT_EQ(cpu.allocated, card.allocated);
}

// mse_loss (Loss.cpp's mse_loss_out, shared by cpu and CUDA): the result sized like the elementwise
// loss (then resized to 0-dim, keeping its storage) and the loss itself, [4, 8]: 64 bytes each in bf16.
// The mean differs: cpu's mean_out computes a bf16 mean in float32, a 0-dim float32 result (4) and a
// float32 copy of the loss (128), freed before returning (Note [mse_loss's reduction on cpu]); CUDA's
// mean_stub reduces into the result. Sum, and fp32, make no float32 copy on either.
TEST_F(CardLoss, Bf16MseMeanOnACardMakesNoFloat32Copy) {
  const at::Tensor x = at::empty({4, 8}, kMeta.dtype(at::kBFloat16));
  const at::Tensor t = at::empty({4, 8}, kMeta.dtype(at::kBFloat16));
  const auto mean = [&] { at::Tensor l = at::mse_loss(x, t, at::Reduction::Mean); };
  const Measured card = MeasureWithKernels(kT4, mean);
  EXPECT_EQ(card.allocated, 64 + 64);
  EXPECT_EQ(card.peak, 64 + 64);
  const Measured cpu = MeasureWithKernels(kCpu, mean);
  EXPECT_EQ(cpu.allocated, 64 + 64 + 4 + 128);
  EXPECT_EQ(cpu.peak, 64 + 64 + 4 + 128);
  for (const KernelTarget& target : {kT4, kCpu}) {
    EXPECT_EQ(MeasureWithKernels(target, [&] { at::Tensor l = at::mse_loss(x, t, at::Reduction::Sum); }).allocated,
              64 + 64);
    const at::Tensor x32 = x.to(at::kFloat), t32 = t.to(at::kFloat);
    EXPECT_EQ(MeasureWithKernels(target, [&] { at::Tensor l = at::mse_loss(x32, t32); }).allocated, 128 + 128);
    // Backward: zeros_like(input) on both (Loss.cpp's mse_loss_backward).
    const at::Tensor grad = at::ones({}, x.options());
    EXPECT_EQ(MeasureWithKernels(target, [&] { at::Tensor g = at::mse_loss_backward(grad, x, t, at::Reduction::Mean); })
                  .allocated,
              64);
  }
}

// The other losses on a [4, 8] input (32 elements): E bytes an element, so the input is 32E. A bf16/fp16
// mean on cpu adds a 0-dim float32 result (4) and a float32 copy of what it reduces (128), freed before
// it returns (Note [mse_loss's reduction on cpu]); a card reduces into the result (32 elements ask
// Reduce.cuh for no scratch). fp32: the same on both.
struct LossCase {
  const char* name;
  int64_t allocated, live, peak;  // in input-sized tensors (32E bytes) plus `scalars` 0-dim results
  int64_t scalars;
};
int64_t CpuMeanExtra(at::ScalarType dtype) { return dtype == at::kFloat ? 0 : 4 + 32 * 4; }

TEST_F(CardLoss, TheOtherLossesAllocateAsOnCpuButForAReducedPrecisionMean) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const at::Tensor x = at::empty({4, 8}, kMeta.dtype(dtype)), t = at::empty({4, 8}, kMeta.dtype(dtype));
    const int64_t n = Bytes(x), scalar = static_cast<int64_t>(x.element_size()), extra = CpuMeanExtra(dtype);
    // binary_cross_entropy (Loss.cu / Loss.cpp): the loss (kept, the scalar's storage), the mean (freed).
    const auto bce = [&] { at::Tensor l = at::binary_cross_entropy(x, t); };
    const Measured bce_card = MeasureWithKernels(kT4, bce), bce_cpu = MeasureWithKernels(kCpu, bce);
    EXPECT_EQ(bce_card.allocated, n + scalar);
    EXPECT_EQ(bce_card.peak, n + scalar);
    EXPECT_EQ(bce_cpu.allocated, n + scalar + extra);
    EXPECT_EQ(bce_cpu.peak, n + scalar + extra);
    // Kept: the loss's input-sized storage, as a 0-dim.
    at::Tensor kept;
    EXPECT_EQ(MeasureWithKernels(kT4, [&] { kept = at::binary_cross_entropy(x, t, {}, at::Reduction::Sum); }).live, n);
    EXPECT_EQ(kept.dim(), 0);
    EXPECT_EQ(static_cast<int64_t>(kept.storage().nbytes()), n);
    kept = at::Tensor();
    // huber_loss (Loss.cpp): the elementwise loss (freed) and the mean (kept).
    const auto huber = [&] { kept = at::huber_loss(x, t); };
    const Measured huber_card = MeasureWithKernels(kT4, huber);
    EXPECT_EQ(huber_card.allocated, n + scalar);
    EXPECT_EQ(huber_card.live, scalar);
    kept = at::Tensor();
    const Measured huber_cpu = MeasureWithKernels(kCpu, huber);
    EXPECT_EQ(huber_cpu.allocated, n + scalar + extra);
    EXPECT_EQ(huber_cpu.live, scalar);
    EXPECT_EQ(huber_cpu.peak, n + scalar + extra);
    kept = at::Tensor();
    // smooth_l1_loss (TORCH_IMPL_FUNC(smooth_l1_loss_out), as mse_loss): the result sized like the loss,
    // the loss, the mean into the result.
    const auto smooth = [&] { at::Tensor l = at::smooth_l1_loss(x, t); };
    EXPECT_EQ(MeasureWithKernels(kT4, smooth).allocated, 2 * n);
    EXPECT_EQ(MeasureWithKernels(kCpu, smooth).allocated, 2 * n + extra);
    // l1_loss (Loss.cpp): (input - target).abs(), both alive through the mean.
    const auto l1 = [&] { at::Tensor l = at::l1_loss(x, t); };
    const Measured l1_card = MeasureWithKernels(kT4, l1), l1_cpu = MeasureWithKernels(kCpu, l1);
    EXPECT_EQ(l1_card.allocated, 2 * n + scalar);
    EXPECT_EQ(l1_card.peak, 2 * n + scalar);
    EXPECT_EQ(l1_cpu.allocated, 2 * n + scalar + extra);
    EXPECT_EQ(l1_cpu.peak, 2 * n + scalar + extra);
    // kl_div (Loss.cpp): xlogy(t, t) - t * x, three input-sized tensors at the subtraction, then its mean.
    const auto kl = [&] { at::Tensor l = at::kl_div(x, t); };
    const Measured kl_card = MeasureWithKernels(kT4, kl), kl_cpu = MeasureWithKernels(kCpu, kl);
    EXPECT_EQ(kl_card.allocated, 3 * n + scalar);
    EXPECT_EQ(kl_card.peak, 3 * n);
    EXPECT_EQ(kl_cpu.allocated, 3 * n + scalar + extra);
    EXPECT_EQ(kl_cpu.peak, std::max(3 * n, n + scalar + extra));
    // The backwards, alike on both: one input-sized gradient each (Loss.cu's
    // binary_cross_entropy_backward_cuda: empty_like(input); Loss.cpp's smooth_l1_loss_backward and
    // huber_loss_backward: zeros_like(input)).
    const at::Tensor grad = at::ones({}, x.options());
    for (const KernelTarget& target : {kT4, kCpu}) {
      EXPECT_EQ(MeasureWithKernels(target, [&] { at::Tensor g = at::binary_cross_entropy_backward(grad, x, t, {}); })
                    .allocated,
                n);
      EXPECT_EQ(
          MeasureWithKernels(target, [&] { at::Tensor g = at::smooth_l1_loss_backward(grad, x, t, 1, 1.0); }).allocated,
          n);
      EXPECT_EQ(
          MeasureWithKernels(target, [&] { at::Tensor g = at::huber_loss_backward(grad, x, t, 1, 1.0); }).allocated, n);
    }
  }
}

// binary_cross_entropy_with_logits (Loss.cpp's composite): log_sigmoid(x), (1 - target), in-place mul_
// and sub_, then the mean. log_sigmoid_forward keeps an input-sized buffer on cpu (Activation.cpp's
// log_sigmoid_forward_cpu) and an empty one on a card (log_sigmoid_forward_cuda: at::empty({0})): one
// input-sized tensor fewer allocated, and no float32 copies for a bf16 mean. The composite drops the
// buffer when log_sigmoid returns, before (1 - target) is made, so the peak differs only by the mean.
TEST_F(CardLoss, BceWithLogitsOnACardKeepsNoLogSigmoidBuffer) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const at::Tensor x = at::empty({4, 8}, kMeta.dtype(dtype)), t = at::empty({4, 8}, kMeta.dtype(dtype));
    const int64_t n = Bytes(x), scalar = static_cast<int64_t>(x.element_size()), extra = CpuMeanExtra(dtype);
    const auto loss = [&] { at::Tensor l = at::binary_cross_entropy_with_logits(x, t); };
    const Measured card = MeasureWithKernels(kT4, loss), cpu = MeasureWithKernels(kCpu, loss);
    EXPECT_EQ(card.allocated, 2 * n + scalar);  // log_sigmoid's result, 1 - target, the mean
    EXPECT_EQ(card.peak, 2 * n + scalar);
    EXPECT_EQ(cpu.allocated, 3 * n + scalar + extra);  // and the buffer, and a bf16 mean's float32 copies
    EXPECT_EQ(cpu.peak, std::max(2 * n, 2 * n + scalar + extra));
    // nn.LogSigmoid alone: forward as above; its backward (log_sigmoid_backward_cuda / _cpu) one gradient.
    at::Tensor buffer;
    const Measured forward = MeasureWithKernels(kT4, [&] { buffer = std::get<1>(at::log_sigmoid_forward(x)); });
    EXPECT_EQ(forward.allocated, n);
    EXPECT_EQ(buffer.numel(), 0);
    EXPECT_EQ(MeasureWithKernels(kT4, [&] { at::Tensor g = at::log_sigmoid_backward(x, x, buffer); }).allocated, n);
    // With autograd, LogSigmoidBackward0 saves self and buffer (derivatives.yaml's log_sigmoid_forward):
    // on cpu a layer keeps an input-sized buffer beside its output, on a card nothing beside it.
    const at::Tensor leaf = at::empty({4, 8}, kMeta.dtype(dtype)).requires_grad_(true);
    at::Tensor y;
    EXPECT_EQ(MeasureWithKernels(kT4, [&] { y = at::log_sigmoid(leaf); }).live, n);
    y = at::Tensor();
    EXPECT_EQ(MeasureWithKernels(kCpu, [&] { y = at::log_sigmoid(leaf); }).live, 2 * n);
    y = at::Tensor();
  }
}

// With autograd: a [4, 8] fp32 leaf through F.binary_cross_entropy_with_logits and backward. The
// forward keeps only the loss (one autograd node, its mean inside it, saving the leaf and the target);
// backward allocates the seed (4) and binary_cross_entropy_with_logits_backward's sigmoid(x) (128), which
// becomes x.grad: FunctionsManual.cpp subtracts the target, multiplies by the gradient and divides by
// numel in place for a card's (and cpu's) tensors, which are not subclass-like (Note
// [binary_cross_entropy_with_logits's backward on meta]; torch 2.11's profiler on cpu: aten::sigmoid
// 512 bytes for [8, 16], then sub_, mul_, div_). The same on a card as on cpu.
TEST_F(CardLoss, BceWithLogitsBackwardIsTheSameOnACard) {
  for (const KernelTarget& target : {kT4, kCpu}) {
    SCOPED_TRACE(Describe(target));
    const at::Tensor x = at::empty({4, 8}, kMeta).requires_grad_(true), t = at::empty({4, 8}, kMeta);
    at::Tensor loss;
    EXPECT_EQ(MeasureWithKernels(target, [&] { loss = at::binary_cross_entropy_with_logits(x, t); }).live, 4);
    const Measured backward = MeasureWithKernels(target, [&] { loss.backward(); });
    EXPECT_EQ(backward.allocated, 4 + 128);
    EXPECT_EQ(backward.peak, 4 + 128);
    EXPECT_EQ(backward.live, 128);  // x.grad
  }
}

}  // namespace
}  // namespace oomguard::testing
