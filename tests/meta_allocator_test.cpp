// The meta tracking allocator: real byte accounting for tensors with no data.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include "allocators/install.h"
#include "backends/meta/kernels/meta_kernels.h"

namespace oomguard {
namespace {

class MetaAllocatorTest : public testing::Test {
 protected:
  void SetUp() override {
    ledger().ResetStatistics();
    base_ = ledger().live_bytes();
    cpu_base_ = CpuAccount().ledger().live_bytes();
  }
  static Ledger& ledger() { return MetaAccount().ledger(); }
  int64_t Live() const { return ledger().live_bytes() - base_; }
  int64_t base_ = 0;
  int64_t cpu_base_ = 0;
};

const at::TensorOptions kMeta = at::TensorOptions().device(at::kMeta);

TEST_F(MetaAllocatorTest, CountsTheBytesTheShapesWouldTake) {
  {
    at::Tensor a = at::empty({1000}, kMeta.dtype(at::kFloat));                    // 4000 bytes
    at::Tensor b = at::empty({10, 10}, kMeta.dtype(at::kBFloat16));               // 200 bytes
    at::Tensor c = at::add(a, a);                                                 // a 4000-byte output
    at::Tensor d = at::mm(at::empty({8, 16}, kMeta), at::empty({16, 4}, kMeta));  // 512 + 256 + 128
    EXPECT_EQ(Live(), 4000 + 200 + 4000 + 128);
  }
  LedgerStats stats = ledger().Snapshot();
  EXPECT_EQ(Live(), 0);
  EXPECT_EQ(stats.alloc_count, 6);
  EXPECT_EQ(stats.allocated_bytes_total, 4000 + 200 + 4000 + 512 + 256 + 128);
  EXPECT_EQ(CpuAccount().ledger().live_bytes(), cpu_base_);  // nothing touched host memory
}

TEST_F(MetaAllocatorTest, AccountsSizesNoMachineCouldHold) {
  at::Tensor huge = at::empty({int64_t{1} << 40}, kMeta.dtype(at::kByte));  // 1 TiB of nothing
  EXPECT_EQ(Live(), int64_t{1} << 40);
  huge.reset();
  EXPECT_EQ(Live(), 0);
}

TEST_F(MetaAllocatorTest, CapAllowsTheBoundaryByteAndRefusesOneMore) {
  ScopedLimits limits(MetaAccount(), LimitsForCap(ledger().live_bytes() + (int64_t{1} << 30)));
  at::Tensor fits = at::empty({int64_t{1} << 28}, kMeta.dtype(at::kFloat));  // exactly 1 GiB
  try {
    at::empty({1}, kMeta.dtype(at::kByte));
    FAIL() << "a byte over the cap was allocated";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_EQ(std::string(e.what_without_backtrace())
                  .rfind("META out of memory (oomguard cap). Tried to allocate 1 bytes.", 0),
              0u)
        << e.what_without_backtrace();
  }
  EXPECT_EQ(Live(), int64_t{1} << 30);
}

TEST_F(MetaAllocatorTest, ReluRunsOnMetaOnceOomguardsKernelsAreRegistered) {
  RegisterMetaKernels();
  at::Tensor x = at::empty({64, 32}, kMeta.dtype(at::kFloat)).requires_grad_();
  at::Tensor y = at::relu(x);  // relu has no C++ Meta kernel in LibTorch itself
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_EQ(Live(), 2 * 64 * 32 * 4);
  y.sum().backward();  // threshold_backward has a structured Meta kernel
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  at::Tensor z = at::empty({8}, kMeta);
  EXPECT_TRUE(at::relu_(z).is_same(z));
}

}  // namespace
}  // namespace oomguard
