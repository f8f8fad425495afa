// A card's cuDNN convolution (backends/meta/kernels/meta_kernels_conv_cudnn.cpp): its tensors are booked,
// its workspace is not, and the run says what bounds it (Note [cuDNN's convolution workspace on a card]).
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "allocators/device_account.h"
#include "allocators/install.h"
#include "backends/meta/kernel_target.h"
#include "tests/card_mode_harness.h"

namespace oomguard::testing {
namespace {

const KernelTarget kT4 = KernelTarget::Cuda(75);
using CardConv = CardModeTest;

// The warning's whole text, as the measurement reports it after "--kernels cuda: ".
constexpr const char* kWorkspaceWarning =
    "aten::convolution: cuDNN's workspace is not booked: PyTorch takes it from the caching allocator while each "
    "convolution runs and frees it when the convolution returns, and skips an engine whose workspace the "
    "allocator refuses (Conv_v8.cpp's try_configs), so it raises no out-of-memory error of its own; it is at most "
    "the cap's headroom at the convolution, and a segment made for it stays reserved in the allocator's cache";

// A [2, 3, 8, 8] input through Conv2d(3, 4, 3, padding=1): the output [2, 4, 8, 8] in float, 2,048 bytes,
// and nothing else (no oneDNN buffers, no workspace); said once for a forward and a backward.
TEST_F(CardConv, BooksTheOutputAloneAndSaysTheWorkspacesBoundOnce) {
  (void)TakeKernelWarnings();
  const at::Tensor x = at::empty({2, 3, 8, 8}, kMeta), w = at::empty({4, 3, 3, 3}, kMeta), b = at::empty({4}, kMeta);
  at::Tensor y;
  const Measured forward = MeasureWithKernels(kT4, [&] { y = at::conv2d(x, w, b, {1, 1}, {1, 1}); });
  EXPECT_EQ(forward.peak, 2 * 4 * 8 * 8 * 4);
  EXPECT_EQ(forward.live, 2 * 4 * 8 * 8 * 4);
  // Backward (cudnn_convolution_backward): grad_input like x (1,536) and grad_weight like w (432); the
  // bias gradient, y's channel sums, 16 more. No workspace.
  const Measured backward = MeasureWithKernels(kT4, [&] {
    const auto grads = at::convolution_backward(y, x, w, std::vector<int64_t>{4}, {1, 1}, {1, 1}, {1, 1}, false,
                                                {0, 0}, 1, {true, true, true});
  });
  EXPECT_EQ(backward.allocated, 2 * 3 * 8 * 8 * 4 + 4 * 3 * 3 * 3 * 4 + 4 * 4);
  EXPECT_EQ(TakeKernelWarnings(), std::vector<std::string>{kWorkspaceWarning});
}

// The bound's consequence for the verdict: under a cap the input, weight, bias and output fit exactly, a
// card's convolution fits (PyTorch would run an engine whose workspace fits the headroom, here none);
// a byte less and the output itself is refused, an OOM as on the card.
TEST_F(CardConv, FitsUnderACapItsTensorsFitExactly) {
  const at::Tensor x = at::empty({2, 3, 8, 8}, kMeta), w = at::empty({4, 3, 3, 3}, kMeta), b = at::empty({4}, kMeta);
  const int64_t output = 2 * 4 * 8 * 8 * 4;
  Ledger& ledger = MetaAccount().ledger();
  ScopedKernelTarget card(kT4);
  {
    ScopedLimits exact(MetaAccount(), LimitsForCap(ledger.live_bytes() + output));
    const at::Tensor y = at::conv2d(x, w, b, {1, 1}, {1, 1});
    EXPECT_EQ(y.nbytes(), static_cast<size_t>(output));
  }
  ScopedLimits short_by_one(MetaAccount(), LimitsForCap(ledger.live_bytes() + output - 1));
  EXPECT_THROW(at::conv2d(x, w, b, {1, 1}, {1, 1}), c10::OutOfMemoryError);
  (void)TakeKernelWarnings();
}

}  // namespace
}  // namespace oomguard::testing
