// Meta as a card: a card's measurement holds the cuBLAS and cuBLASLt workspaces from the start, outside
// the ledger and in the caching allocator model's reserved bytes, as the cuda backend does (Note [cuBLAS
// workspaces held from the start]); the sizes are CublasHandlePool.cpp's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "backends/meta/cublas_workspace.h"
#include "backends/meta/kernel_target.h"
#include "tests/card_mode_harness.h"
#include "tests/meta_ops_harness.h"

namespace oomguard {
namespace {

using testing::kMeta;
using CardWorkspaces = testing::CardModeTest;

template <typename F>
testing::Measured Measure(F&& f) {
  return testing::MeasureOnMeta(std::forward<F>(f));
}

// cuBLAS workspaces (CublasHandlePool.cpp): 4096 KiB x 2 + 16 KiB x 8 = 8519680 bytes below sm_90,
// 4096 KiB x 8 = 33554432 on sm_90; cuBLASLt's 1 MiB beside it for addmm with a bias vector.
TEST_F(CardWorkspaces, CublasWorkspaceSizesPerCapability) {
  EXPECT_EQ(CublasWorkspaceBytes(75), 8519680);
  EXPECT_EQ(CublasWorkspaceBytes(80), 8519680);
  EXPECT_EQ(CublasWorkspaceBytes(90), 33554432);
  EXPECT_EQ(CublasLtWorkspaceBytes(80), 1048576);
  EXPECT_EQ(CublasLtWorkspaceBytes(90), 1048576);
}

// Which a card's process holds from the start: the cuBLAS workspace, then cuBLASLt's; none on cpu kernels.
TEST_F(CardWorkspaces, ACardHoldsBothWorkspacesFromTheStart) {
  EXPECT_EQ(CublasWorkspacesHeldFromStart(KernelTarget::Cuda(75)), (std::vector<int64_t>{8519680, 1048576}));
  EXPECT_EQ(CublasWorkspacesHeldFromStart(KernelTarget::Cuda(90)), (std::vector<int64_t>{33554432, 1048576}));
  EXPECT_TRUE(CublasWorkspacesHeldFromStart(KernelTarget{}).empty());
}

// The workspaces are not tensors: a matmul on a card books its output alone, a linear with a bias (the
// cuBLASLt path) too, as on cpu kernels.
TEST_F(CardWorkspaces, AMatmulOnACardBooksItsOutputOnly) {
  const at::Tensor a = at::empty({8, 16}, kMeta), b = at::empty({16, 4}, kMeta);
  const at::Tensor w = at::empty({4, 16}, kMeta), bias = at::empty({4}, kMeta);
  for (const int cc : {75, 90}) {
    ScopedKernelTarget card(KernelTarget::Cuda(cc));
    at::Tensor c, d, y;
    EXPECT_EQ(Measure([&] { c = at::mm(a, b); }).live, 128);  // the [8, 4] float output
    EXPECT_EQ(Measure([&] { d = at::bmm(a.unsqueeze(0), b.unsqueeze(0)); }).live, 128);
    EXPECT_EQ(Measure([&] { y = at::linear(a, w, bias); }).live, 128);
  }
}

namespace {
// One forward of a [1536, 2048] float weight (12 MiB) times a [2048, 4] one: the ledger peaks at the
// two parameters and the [1536, 4] output.
VariantMeasurement MeasureMatmul(const KernelTarget& kernels, int64_t cap_bytes) {
  VariantSpec spec;
  spec.loop.iterations = 1;
  VariantMeasureOptions options;
  options.backend = Backend::kMeta;
  options.kernels = kernels;
  options.limits.cap_bytes = cap_bytes;
  options.model_cuda = ModelCuda::kVerdict;
  return MeasureWorkload(
      [](Context& ctx) {
        oomguard::testing::Parameters p(ctx);
        const at::Tensor a = p.Add({1536, 2048}), b = p.Add({2048, 4});
        for (int64_t i : ctx.Iterations()) {
          (void)i;
          auto phase = ctx.Phase("forward");
          const at::Tensor c = at::mm(a, b);
        }
      },
      spec, options);
}
constexpr int64_t kMatmulLedgerPeak = 1536 * 2048 * 4 + 2048 * 4 * 4 + 1536 * 4 * 4;  // 12640256
constexpr int64_t kMiB = 1 << 20;
}  // namespace

// A card's measurement holds the workspaces from the start, outside the ledger, as the cuda backend
// does (Note [Library workspaces on cuda]): the ledger's peak is cpu kernels' (mm allocates alike),
// and the model of the caching allocator reports them held from the start. On an A100 (sm_80): the
// 8.125 MiB cuBLAS workspace, a large block of a 20 MiB segment, and cuBLASLt's 1 MiB, a small block
// of a 2 MiB segment; then the 12 MiB weight needs a segment of its own (the 20 MiB one has 11.875
// MiB left): 34 MiB reserved. On an H100 (sm_90) the 32 MiB workspace is a segment of its own.
TEST_F(CardWorkspaces, AMeasurementHoldsTheWorkspacesFromTheStartOutsideTheLedger) {
  const int64_t cap = 80 * int64_t{1} << 30;
  const VariantMeasurement cpu = MeasureMatmul(KernelTarget{}, cap);
  const VariantMeasurement a100 = MeasureMatmul(KernelTarget::Cuda(80), cap);
  const VariantMeasurement h100 = MeasureMatmul(KernelTarget::Cuda(90), cap);
  for (const VariantMeasurement* m : {&cpu, &a100, &h100}) {
    EXPECT_EQ(Name(m->outcome), "pass") << m->error;
    EXPECT_EQ(m->ledger.peak_bytes, kMatmulLedgerPeak);
    ASSERT_TRUE(m->cuda_model.has_value());
  }
  EXPECT_EQ(kMatmulLedgerPeak, 12640256);
  EXPECT_EQ(cpu.cuda_model->allocated_at_start_bytes, 0);
  EXPECT_EQ(cpu.cuda_model->reserved_at_start_bytes, 0);
  EXPECT_EQ(a100.cuda_model->allocated_at_start_bytes, 8519680 + 1048576);
  EXPECT_EQ(a100.cuda_model->reserved_at_start_bytes, 20 * kMiB + 2 * kMiB);
  EXPECT_EQ(a100.cuda_model->reserved_peak_bytes, 20 * kMiB + 2 * kMiB + 12 * kMiB);
  EXPECT_EQ(h100.cuda_model->allocated_at_start_bytes, 33554432 + 1048576);
  EXPECT_EQ(h100.cuda_model->reserved_at_start_bytes, 32 * kMiB + 2 * kMiB);
  // Each measurement takes its own (a fresh process's), so a second one reads the same.
  EXPECT_EQ(MeasureMatmul(KernelTarget::Cuda(90), cap).cuda_model->reserved_peak_bytes,
            h100.cuda_model->reserved_peak_bytes);
}

// The workspaces count against the cap in the verdict on reserved bytes. A 21 MiB cap holds the
// ledger's 12.05 MiB peak (cpu kernels': a 12 MiB segment and a 2 MiB small one) but not that peak
// plus the A100's 9.125 MiB of workspaces. A 23 MiB cap would hold even that sum (21.18 MiB), but not
// the segments a GPU needs: 20 + 2 MiB for the workspaces, and the 12 MiB weight does not fit the
// 11.875 MiB the 20 MiB segment has left, so it needs a 12 MiB segment of its own: 34 MiB. Both OOM on
// the card, as on the GPU; with 34 MiB it passes.
TEST_F(CardWorkspaces, ACapAboveTheLedgerPeakButBelowItWithTheWorkspacesIsAnOom) {
  const int64_t below_the_sum = 21 * kMiB;
  ASSERT_LT(kMatmulLedgerPeak, below_the_sum);
  ASSERT_GT(kMatmulLedgerPeak + 8519680 + 1048576, below_the_sum);
  EXPECT_EQ(Name(MeasureMatmul(KernelTarget{}, below_the_sum).outcome), "pass");
  const VariantMeasurement refused = MeasureMatmul(KernelTarget::Cuda(80), below_the_sum);
  EXPECT_EQ(Name(refused.outcome), "oom");
  // Taken uncapped, as the cuda backend takes them: held whole, the weight is the one refused.
  ASSERT_TRUE(refused.cuda_model.has_value());
  EXPECT_EQ(refused.cuda_model->reserved_at_start_bytes, 22 * kMiB);
  EXPECT_EQ(refused.cuda_model->ooms, 1);
  ASSERT_TRUE(refused.oom.has_value());
  EXPECT_EQ(refused.oom->requested_bytes, 1536 * 2048 * 4);
  const int64_t cap = 23 * kMiB;
  ASSERT_LT(kMatmulLedgerPeak + 8519680 + 1048576, cap);
  EXPECT_EQ(Name(MeasureMatmul(KernelTarget{}, cap).outcome), "pass");
  const VariantMeasurement card = MeasureMatmul(KernelTarget::Cuda(80), cap);
  EXPECT_EQ(Name(card.outcome), "oom") << card.error;
  ASSERT_TRUE(card.cuda_model.has_value());
  EXPECT_EQ(card.cuda_model->ooms, 1);
  EXPECT_EQ(card.cuda_model->reserved_at_start_bytes, 22 * kMiB);
  // With room for both, the card passes.
  EXPECT_EQ(Name(MeasureMatmul(KernelTarget::Cuda(80), 34 * kMiB).outcome), "pass");
}

}  // namespace
}  // namespace oomguard
