// Losses as a card allocates them (Note [Losses on a card], backends/meta/kernels/meta_kernels_loss.cpp):
// cross entropy's log_softmax, nll_loss and nll_loss2d, and mse_loss, forward and backward, against what
// cpu's kernels allocate. Each expectation is derived from PyTorch 2.11's CUDA host code.
#include <ATen/ATen.h>
#include <ATen/core/Reduction.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace oomguard::testing
