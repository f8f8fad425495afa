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
#include "base/byte_size.h"
#include "backends/meta/kernel_target.h"
#include "tests/card_mode_harness.h"

namespace oomguard::testing {
namespace {

const KernelTarget kT4 = KernelTarget::Cuda(75);
using CardConv = CardModeTest;

// The warning's whole text, as the measurement reports it after "--kernels cuda: ": without a cap, and
// under one with the least headroom a cuDNN call had ({bytes}).
constexpr const char* kWorkspaceWarning =
    "aten::convolution: cuDNN's workspace is not booked: PyTorch takes it from the caching allocator while each "
    "convolution runs and frees it when the convolution returns, and skips an engine whose workspace the "
    "allocator refuses (Conv_v8.cpp's try_configs), so it raises no out-of-memory error of its own; it is at most "
    "the cap's headroom at the convolution, and a segment made for it stays reserved in the allocator's cache";
std::string BoundWarning(const std::string& bytes) {
  return "aten::convolution: cuDNN's workspace is not booked: PyTorch takes it from the caching allocator while "
         "each convolution runs and frees it when the convolution returns, and skips an engine whose workspace the "
         "allocator refuses (Conv_v8.cpp's try_configs), so it raises no out-of-memory error of its own; it is at "
         "most the cap's headroom at the convolution, " +
         bytes +
         " at the tightest (the cap less the tensors live there), and a segment made for it stays reserved in the "
         "allocator's cache";
}

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
// card's convolution fits (PyTorch would run an engine whose workspace fits the headroom, here none: the
// warning says 0 bytes); a byte less and the output itself is refused, an OOM as on the card.
TEST_F(CardConv, FitsUnderACapItsTensorsFitExactly) {
  (void)TakeKernelWarnings();
  const at::Tensor x = at::empty({2, 3, 8, 8}, kMeta), w = at::empty({4, 3, 3, 3}, kMeta), b = at::empty({4}, kMeta);
  const int64_t output = 2 * 4 * 8 * 8 * 4;
  Ledger& ledger = MetaAccount().ledger();
  ScopedKernelTarget card(kT4);
  {
    ScopedLimits exact(MetaAccount(), LimitsForCap(ledger.live_bytes() + output));
    const at::Tensor y = at::conv2d(x, w, b, {1, 1}, {1, 1});
    EXPECT_EQ(y.nbytes(), static_cast<size_t>(output));
  }
  EXPECT_EQ(TakeKernelWarnings(), std::vector<std::string>{BoundWarning("0 bytes")});
  ScopedLimits short_by_one(MetaAccount(), LimitsForCap(ledger.live_bytes() + output - 1));
  EXPECT_THROW(at::conv2d(x, w, b, {1, 1}, {1, 1}), c10::OutOfMemoryError);
  (void)TakeKernelWarnings();
}

// The number is the least headroom over the run's cuDNN calls: 1 MiB over the output in the forward;
// in the backward, with the output kept as the gradient, 1 MiB less grad_input (1,536) at the
// backward-data call and less grad_weight (432) too at the backward-filter call: 1,046,608 bytes.
TEST_F(CardConv, TheBoundIsTheLeastHeadroomAtACudnnCall) {
  (void)TakeKernelWarnings();
  const at::Tensor x = at::empty({2, 3, 8, 8}, kMeta), w = at::empty({4, 3, 3, 3}, kMeta), b = at::empty({4}, kMeta);
  const int64_t output = 2 * 4 * 8 * 8 * 4;
  Ledger& ledger = MetaAccount().ledger();
  ScopedKernelTarget card(kT4);
  ScopedLimits cap(MetaAccount(), LimitsForCap(ledger.live_bytes() + output + (int64_t{1} << 20)));
  const at::Tensor y = at::conv2d(x, w, b, {1, 1}, {1, 1});
  EXPECT_EQ(TakeKernelWarnings(), std::vector<std::string>{BoundWarning(FormatBytes(int64_t{1} << 20) + " (1048576 bytes)")});
  const auto grads = at::convolution_backward(y, x, w, std::vector<int64_t>{4}, {1, 1}, {1, 1}, {1, 1}, false,
                                              {0, 0}, 1, {true, true, true});
  const int64_t least = (int64_t{1} << 20) - 2 * 3 * 8 * 8 * 4 - 4 * 3 * 3 * 3 * 4;
  EXPECT_EQ(least, 1046608);
  EXPECT_EQ(TakeKernelWarnings(), std::vector<std::string>{BoundWarning(FormatBytes(least) + " (1046608 bytes)")});
}

}  // namespace
}  // namespace oomguard::testing
