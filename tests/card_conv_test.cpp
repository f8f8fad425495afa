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
#include "base/byte_size.h"
#include "tests/card_mode_harness.h"

namespace oomguard::testing {
namespace {

const KernelTarget kT4 = KernelTarget::Cuda(75);

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

// A [2, 3, 8, 8] input through Conv2d(3, 4, 3, padding=1): the output [2, 4, 8, 8] in float, 2,048
// bytes; backward's grad_input like x (1,536) and grad_weight like w (432).
class CardConv : public CardModeTest {
 protected:
  static constexpr int64_t kOutput = 2 * 4 * 8 * 8 * 4, kGradInput = 2 * 3 * 8 * 8 * 4, kGradWeight = 4 * 3 * 3 * 3 * 4;
  void SetUp() override {
    CardModeTest::SetUp();
    (void)TakeKernelWarnings();
  }
  at::Tensor Forward() const { return at::conv2d(x_, w_, b_, {1, 1}, {1, 1}); }
  void Backward(const at::Tensor& grad) const {
    const auto grads = at::convolution_backward(grad, x_, w_, std::vector<int64_t>{4}, {1, 1}, {1, 1}, {1, 1}, false,
                                                {0, 0}, 1, {true, true, true});
  }
  // A cap `extra` bytes over what is live now plus the output.
  static Limits CapOverTheOutput(int64_t extra) {
    return LimitsForCap(MetaAccount().ledger().live_bytes() + kOutput + extra);
  }
  const at::Tensor x_ = at::empty({2, 3, 8, 8}, kMeta), w_ = at::empty({4, 3, 3, 3}, kMeta), b_ = at::empty({4}, kMeta);
};

// The output and nothing else (no oneDNN buffers, no workspace); said once for a forward and a backward.
TEST_F(CardConv, BooksTheOutputAloneAndSaysTheWorkspacesBoundOnce) {
  at::Tensor y;
  const Measured forward = MeasureWithKernels(kT4, [&] { y = Forward(); });
  EXPECT_EQ(forward.peak, kOutput);
  EXPECT_EQ(forward.live, kOutput);
  // Backward (cudnn_convolution_backward): grad_input and grad_weight; the bias gradient, y's channel
  // sums, 16 more. No workspace.
  EXPECT_EQ(MeasureWithKernels(kT4, [&] { Backward(y); }).allocated, kGradInput + kGradWeight + 4 * 4);
  EXPECT_EQ(TakeKernelWarnings(), std::vector<std::string>{kWorkspaceWarning});
}

// The bound's consequence for the verdict: under a cap the input, weight, bias and output fit exactly, a
// card's convolution fits (PyTorch would run an engine whose workspace fits the headroom, here none: the
// warning says 0 bytes); a byte less and the output itself is refused, an OOM as on the card.
TEST_F(CardConv, FitsUnderACapItsTensorsFitExactly) {
  ScopedKernelTarget card(kT4);
  {
    ScopedLimits exact(MetaAccount(), CapOverTheOutput(0));
    EXPECT_EQ(Forward().nbytes(), static_cast<size_t>(kOutput));
  }
  EXPECT_EQ(TakeKernelWarnings(), std::vector<std::string>{BoundWarning("0 bytes")});
  ScopedLimits short_by_one(MetaAccount(), CapOverTheOutput(-1));
  EXPECT_THROW(Forward(), c10::OutOfMemoryError);
  (void)TakeKernelWarnings();
}

// The number is the least headroom over the run's cuDNN calls: 1 MiB over the output in the forward;
// in the backward, with the output kept as the gradient, 1 MiB less grad_input at the backward-data call
// and less grad_weight too at the backward-filter call: 1,046,608 bytes.
TEST_F(CardConv, TheBoundIsTheLeastHeadroomAtACudnnCall) {
  ScopedKernelTarget card(kT4);
  ScopedLimits cap(MetaAccount(), CapOverTheOutput(int64_t{1} << 20));
  const at::Tensor y = Forward();
  EXPECT_EQ(TakeKernelWarnings(),
            std::vector<std::string>{BoundWarning(FormatBytes(int64_t{1} << 20) + " (1048576 bytes)")});
  Backward(y);
  const int64_t least = (int64_t{1} << 20) - kGradInput - kGradWeight;
  EXPECT_EQ(least, 1046608);
  EXPECT_EQ(TakeKernelWarnings(), std::vector<std::string>{BoundWarning(FormatBytes(least) + " (1046608 bytes)")});
}

}  // namespace
}  // namespace oomguard::testing
