// A matrix product's operand copies on meta (Note [Operand copies of a matrix product],
// backends/meta/kernels/meta_kernels_matmul.cpp): cpu's kernels' on the cpu backend and on meta, a
// card's on meta in card mode. Floats (4 bytes); x [8, 64], w [256, 64] (a Linear's weight), xs [8, 128],
// g = a scalar's ones expanded to [8, 256] (strides (0, 0): what sum()'s backward hands a Linear).
// Eager torch 2.11 on cpu agrees: the profiler's aten::clone under aten::mm allocates 8,192 bytes for
// g.mm(w) and g.t().mm(x), 2,048 for xs[:, ::2].mm(w.t()), none for x.mm(w.t()) or xs[:, :64].mm(w.t());
// under aten::bmm four of 2,048 for the strided bmm below.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>

#include "tests/card_mode_harness.h"
#include "tests/meta_ops_harness.h"

namespace oomguard {
namespace {

using testing::kMeta;

struct Inputs {
  at::Tensor x, w, xs, g, a, bs;
};
Inputs MakeInputs(const at::TensorOptions& options) {
  return {at::ones({8, 64}, options),    at::ones({256, 64}, options),
          at::ones({8, 128}, options),   at::ones({}, options).expand({8, 256}),
          at::ones({4, 8, 32}, options), at::ones({4, 32, 32}, options)};
}
// x, w, xs, the scalar under g, a [4, 8, 32] and bs [4, 32, 32].
constexpr int64_t kInputBytes = (8 * 64 + 256 * 64 + 8 * 128 + 1 + 4 * 8 * 32 + 4 * 32 * 32) * 4;

using Op = std::function<at::Tensor(const Inputs&)>;

// The op's peak above its live inputs, on the cpu backend or meta (cpu's
// kernels), inputs made in setup.
testing::Measured OnBackend(Backend backend, const Op& op) {
  const VariantMeasurement m = testing::MeasureOneIteration(backend, [&](Context& ctx) {
    const Inputs in = MakeInputs(ctx.options());
    for (int64_t i : ctx.Iterations()) {
      (void)i;
      auto phase = ctx.Phase("forward");
      const at::Tensor y = op(in);
    }
  });
  EXPECT_EQ(Name(m.outcome), "pass") << m.error;
  for (const PhasePeak& p : m.ledger.phase_peaks) {
    if (p.phase == "forward") return {0, 0, p.peak_bytes - kInputBytes};
  }
  ADD_FAILURE() << "no forward phase";
  return {};
}

// The same op on meta with a card's kernels (sm_80).
int64_t OnACard(const Op& op) {
  RegisterMetaKernels();
  const Inputs in = MakeInputs(kMeta);
  at::Tensor y;
  return testing::MeasureWithKernels(KernelTarget::Cuda(80), [&] { y = op(in); }).peak;
}

void ExpectPeaks(const Op& op, int64_t cpu, int64_t card) {
  EXPECT_EQ(OnBackend(Backend::kCpu, op).peak, cpu) << "cpu backend";
  EXPECT_EQ(OnBackend(Backend::kMeta, op).peak, cpu) << "meta, cpu's kernels";
  EXPECT_EQ(OnACard(op), card) << "meta, a card's kernels";
}

// The Linear's backward under .sum(): g.mm(w) (the input's gradient) and g.t().mm(x) (the weight's).
// cpu: the [8, 64] result is row-major, so addmm_impl_cpu_ runs the transposed product (w, g): w is
// row-major with leading dimension 64 >= 64, g's strides (0, 0) fit neither layout and g is cloned:
// 8 x 256 x 4 = 8,192 beside the 8 x 64 x 4 = 2,048 result. A card: g is not dense and neither stride
// is 1, prepare_matrix_for_cublas clones it (Blas.cpp); the result and w are dense. Same 10,240.
TEST(MetaMatmulCopies, TheExpandedGradientOfSumIsCopied) {
  ExpectPeaks([](const Inputs& in) { return in.g.mm(in.w); }, 2048 + 8192, 2048 + 8192);
  // The weight's gradient: a [256, 64] result, 65,536 bytes, beside the same 8,192-byte copy.
  ExpectPeaks([](const Inputs& in) { return in.g.t().mm(in.x); }, 65536 + 8192, 65536 + 8192);
  // addmm (a Linear's forward) reads its operands alike: [8, 64] result plus the copy.
  ExpectPeaks([](const Inputs& in) { return at::addmm(in.x.select(1, 0).unsqueeze(1), in.g, in.w); }, 2048 + 8192,
              2048 + 8192);
}

// x.mm(w.t()): w.t() has strides (1, 64), column-major with leading dimension 64 >= k; BLAS reads it
// transposed on cpu and cuBLAS on a card (it is dense): the [8, 256] result alone, 8,192 bytes.
TEST(MetaMatmulCopies, ATransposedOperandIsReadAsItIs) {
  ExpectPeaks([](const Inputs& in) { return in.x.mm(in.w.t()); }, 8192, 8192);
}

// xs[:, ::2] (strides (128, 2)): no unit stride, cloned by both: 8 x 64 x 4 = 2,048 beside the 8,192
// result. xs[:, :64] (strides (128, 1)): row-major with leading dimension 128 >= 64, read as it is.
TEST(MetaMatmulCopies, ASliceWithAStepIsCopiedOneWithARowStrideIsNot) {
  ExpectPeaks([](const Inputs& in) { return in.xs.slice(1, 0, 128, 2).mm(in.w.t()); }, 8192 + 2048, 8192 + 2048);
  ExpectPeaks([](const Inputs& in) { return in.xs.slice(1, 0, 64).mm(in.w.t()); }, 8192, 8192);
}

// bmm(a, bs[:, :, ::2]): a [4, 8, 16] result (2,048 bytes); 32 x 8 x 16 >= 400 multiply-adds and the
// second operand's items (strides (32, 2)) fit no layout, so cpu splits by batch: addmm_impl_cpu_ clones
// each [32, 16] item (2,048 bytes) and frees it before the next: peak 2,048 + 2,048. A card clones the
// whole operand once (prepare_batch_matrix_for_cublas: not contiguous): 4 x 2,048 = 8,192 beside the
// result. An operand expanded over the batch with row-major items is read as it is by both.
TEST(MetaMatmulCopies, BmmCopiesItemByItemOnCpuAndWholeOnACard) {
  ExpectPeaks([](const Inputs& in) { return at::bmm(in.a, in.bs.slice(2, 0, 32, 2)); }, 2048 + 2048, 2048 + 8192);
  ExpectPeaks([](const Inputs& in) { return at::bmm(in.a, in.bs.slice(0, 0, 1).expand({4, 32, 32})); }, 4096, 4096);
  // baddbmm follows bmm's paths: the [4, 8, 16] result, then the same copies.
  ExpectPeaks([](const Inputs& in) { return at::baddbmm(in.a.slice(2, 0, 16), in.a, in.bs.slice(2, 0, 32, 2)); },
              2048 + 2048, 2048 + 8192);
}

}  // namespace
}  // namespace oomguard
