// Autocast on meta with a card's kernels casts as AutocastCUDA does (Note [AutocastCUDA on meta],
// nn/autocast/meta_autocast.cpp): its table is the operators with an AutocastCUDA kernel in this process, each
// policy gives the dtypes CUDA's gives, and each difference between the cpu and CUDA tables that the
// catalog's autocast models hit costs the bytes derived here from the kernels. Python's
// CardAutocastMatchesFakeCuda checks the same models against PyTorch's own AutocastCUDA.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "allocators/install.h"
#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels.h"
#include "nn/autocast/autocast.h"
#include "nn/autocast/meta_autocast.h"
#include "oomguard/workload.h"
#include "tests/catalog_variant.h"
#include "tests/meta_ops_harness.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

const KernelTarget kT4 = KernelTarget::Cuda(75);

TEST(CardAutocast, TheTableIsAutocastCudasOperators) {
  std::set<std::string> cuda;
  for (const c10::OperatorName& op :
       c10::Dispatcher::singleton().getAllOpNamesForDispatchKey(c10::DispatchKey::AutocastCUDA)) {
    cuda.insert(op.overload_name.empty() ? op.name : op.name + "." + op.overload_name);
  }
  // _cudnn_rnn's wrapper is registered by libtorch_cuda (cudnn/AutocastRNN.cpp), which this test binary
  // links; the rest by libtorch_cpu (autocast_mode.cpp).
  ASSERT_TRUE(cuda.count("aten::_cudnn_rnn")) << "libtorch_cuda's registrations are missing";
  const std::vector<std::string> table = MetaAutocastOperators(c10::kCUDA);
  const std::set<std::string> ours(table.begin(), table.end());
  EXPECT_EQ(ours.size(), table.size()) << "an operator is listed twice";
  EXPECT_EQ(ours, cuda)
      << "the pinned torch's AutocastCUDA table changed: update kCuda in nn/autocast/autocast_table_cuda.cpp";
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCUDA, "linear"), AutocastPolicy::kLowerPrecision);
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCUDA, "layer_norm"), AutocastPolicy::kFloat32);
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCUDA, "softmax.int"), AutocastPolicy::kFloat32SetOptDtype);
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCUDA, "norm.Scalar"), AutocastPolicy::kFloat32AppendDtype);
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCUDA, "index_put"), AutocastPolicy::kPromote);
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCUDA, "binary_cross_entropy"), AutocastPolicy::kBanned);
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCUDA, "cross_entropy_loss"), std::nullopt);  // cpu's table only
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCPU, "layer_norm"), std::nullopt);           // CUDA's table only
}

// The dtype each op returns under autocast on meta, by `mirrors`' table.
std::vector<at::ScalarType> DtypesOnMeta(c10::DeviceType mirrors, at::ScalarType lower) {
  RegisterMetaKernels();
  const at::TensorOptions o = at::TensorOptions().device(c10::kMeta);
  const at::Tensor x = at::ones({4, 8}, o), w = at::ones({3, 8}, o), y16 = at::ones({4, 8}, o.dtype(lower));
  const at::Tensor d = at::ones({4, 4}, o.dtype(at::kDouble)), target = at::zeros({4}, o.dtype(at::kLong));
  AutocastScope autocast({c10::kMeta, lower, mirrors});
  return {
      at::linear(x, w).scalar_type(),                     // 0 lower precision on both
      at::layer_norm(y16, {8}).scalar_type(),             // 1 fp32 on CUDA; not listed on cpu
      at::softmax(y16, 1).scalar_type(),                  // 2 CUDA: dtype set to float; not listed on cpu
      at::log_softmax(y16, 1, lower).scalar_type(),       // 3 a dtype given is kept
      at::sum(y16).scalar_type(),                         // 4 CUDA: dtype set to float
      at::norm(y16).scalar_type(),                        // 5 CUDA: norm with float appended
      at::exp(y16).scalar_type(),                         // 6 fp32 on CUDA
      at::cross_entropy_loss(y16, target).scalar_type(),  // 7 cpu: fp32; CUDA: log_softmax as is, nll_loss fp32
      at::cat({y16, x}).scalar_type(),                    // 8 promote on cpu; not listed on CUDA: as cat does
      at::mm(d, d).scalar_type(),                         // 9 double is never cast
      at::einsum("ij,kj->ik", {x, w}).scalar_type(),      // 10 lower precision (listed on CUDA; bmm on cpu)
      at::relu(x).scalar_type(),                          // 11 not listed: as it is
  };
}

TEST(CardAutocast, CastsEachOpAsAutocastCudaDoes) {
  for (const at::ScalarType lower : {at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(c10::toString(lower));
    const std::vector<at::ScalarType> cuda = DtypesOnMeta(c10::kCUDA, lower);
    const std::vector<at::ScalarType> expected_cuda = {lower,      at::kFloat,  at::kFloat, lower,
                                                       at::kFloat, at::kFloat,  at::kFloat, at::kFloat,
                                                       at::kFloat, at::kDouble, lower,      at::kFloat};
    EXPECT_EQ(cuda, expected_cuda);
    const std::vector<at::ScalarType> cpu = DtypesOnMeta(c10::kCPU, lower);
    const std::vector<at::ScalarType> expected_cpu = {lower, lower,      lower,      lower,       lower, lower,
                                                      lower, at::kFloat, at::kFloat, at::kDouble, lower, at::kFloat};
    EXPECT_EQ(cpu, expected_cpu);
  }
  EXPECT_FALSE(MetaAutocastDtype().has_value()) << "the scope left autocast on";
  EXPECT_EQ(MetaAutocastMirrors(), c10::kCPU);
}

// binary_cross_entropy_banned: refused under CUDA's autocast, before any kernel runs; fp32 under the cpu's.
TEST(CardAutocast, RefusesBinaryCrossEntropyAsAutocastCudaDoes) {
  const at::TensorOptions o = at::TensorOptions().device(c10::kMeta);
  const at::Tensor p = at::full({4}, 0.5, o), t = at::zeros({4}, o);
  AutocastScope autocast({c10::kMeta, at::kBFloat16, c10::kCUDA});
  try {
    (void)at::binary_cross_entropy(p, t);
    ADD_FAILURE() << "binary_cross_entropy ran under CUDA's autocast";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("unsafe to autocast on CUDA"), std::string::npos)
        << e.what_without_backtrace();
  }
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCPU, "binary_cross_entropy"), AutocastPolicy::kFloat32);
}

// What `f` leaves live on meta under autocast by `mirrors`' table with `target`'s kernels (its result,
// what autograd saved, the weight casts cached), and the highest live bytes above the start while it ran.
struct Bytes {
  int64_t left = 0;
  int64_t peak = 0;
};
template <class F>
Bytes UnderAutocast(const KernelTarget& target, at::ScalarType lower, F&& f) {
  RegisterMetaKernels();
  ScopedKernelTarget kernels(target);
  Ledger& ledger = MetaAccount().ledger();
  ledger.ResetStatistics();
  const int64_t before = ledger.live_bytes();
  Bytes bytes;
  AutocastScope autocast({c10::kMeta, lower, target.cuda() ? c10::kCUDA : c10::kCPU});
  const at::Tensor kept = f();
  bytes.left = ledger.live_bytes() - before;
  bytes.peak = ledger.Snapshot().peak_bytes - before;
  return bytes;
}

const at::TensorOptions kMeta = at::TensorOptions().device(c10::kMeta);
constexpr int64_t kB = 64;  // rows (tokens)

// linear: lower precision on both tables. Left: the bf16 output [64, 16], the bf16 copy of x that
// addmm saves (the weight requires grad), the cached bf16 copies of the weight and bias (kept until
// the outermost scope exits; mat2 is saved too, since x requires grad).
TEST(CardAutocast, ALinearKeepsItsBf16InputAndWeightCopiesOnBothTables) {
  const at::Tensor x = at::empty({kB, 32}, kMeta).requires_grad_(true);
  const at::Tensor w = at::empty({16, 32}, kMeta).requires_grad_(true), b = at::empty({16}, kMeta).requires_grad_(true);
  const int64_t expected = kB * 16 * 2 + kB * 32 * 2 + 16 * 32 * 2 + 16 * 2;
  for (const KernelTarget& target : {kT4, KernelTarget::Cpu()}) {
    SCOPED_TRACE(Describe(target));
    EXPECT_EQ(UnderAutocast(target, at::kBFloat16, [&] { return at::linear(x, w, b); }).left, expected);
  }
}

// layer_norm (the catalog's MLP and transformer): fp32 on CUDA, not listed on cpu. A bf16 activation
// [64, 32] with fp32 weight and bias. CUDA: a fp32 copy of the input (saved), a fp32 output, fp32
// mean and rstd [64]. cpu: a bf16 output, mean and rstd in the parameters' dtype, fp32 (no copy: the
// bf16 input itself is saved, and it is not booked here).
TEST(CardAutocast, LayerNormRunsInFp32OnTheCardAndInBf16OnCpu) {
  const at::Tensor h = at::empty({kB, 32}, kMeta.dtype(at::kBFloat16)).requires_grad_(true);
  const at::Tensor w = at::empty({32}, kMeta).requires_grad_(true), b = at::empty({32}, kMeta).requires_grad_(true);
  const auto ln = [&] { return at::layer_norm(h, {32}, w, b); };
  EXPECT_EQ(UnderAutocast(kT4, at::kBFloat16, ln).left, kB * 32 * 4 + kB * 32 * 4 + 2 * kB * 4);
  EXPECT_EQ(UnderAutocast(KernelTarget::Cpu(), at::kBFloat16, ln).left, kB * 32 * 2 + 2 * kB * 4);
}

// cross entropy (both catalog models' loss): cross_entropy_loss is fp32 on cpu's table only. bf16
// logits [64, 10]. CUDA: log_softmax keeps the bf16 dtype cross_entropy gives it (bf16 log-probabilities,
// saved by its backward), nll_loss casts them to fp32 (saved), then the loss and total_weight, 4 bytes
// each. cpu: a fp32 copy of the logits (dead when cross_entropy returns: in the peak), fp32
// log-probabilities (saved), the loss and total_weight.
TEST(CardAutocast, CrossEntropyKeepsBf16AndFp32LogProbabilitiesOnTheCard) {
  const at::Tensor logits = at::empty({kB, 10}, kMeta.dtype(at::kBFloat16)).requires_grad_(true);
  const at::Tensor target = at::zeros({kB}, kMeta.dtype(at::kLong));
  const auto ce = [&] { return at::cross_entropy_loss(logits, target); };
  const Bytes card = UnderAutocast(kT4, at::kBFloat16, ce);
  EXPECT_EQ(card.left, kB * 10 * 2 + kB * 10 * 4 + 4 + 4);
  const Bytes cpu = UnderAutocast(KernelTarget::Cpu(), at::kBFloat16, ce);
  EXPECT_EQ(cpu.left, kB * 10 * 4 + 4 + 4);
  // The copy lives until the op returns: with the log-probabilities, the loss and total_weight.
  EXPECT_EQ(cpu.peak, kB * 10 * 4 + kB * 10 * 4 + 4 + 4);
}

// softmax (the transformer's attention): fp32_set_opt_dtype on CUDA, not listed on cpu. Scores [64, 32].
// bf16 on the card: a fp32 copy of the input inside softmax (dead on return), then the fp32 output
// (saved). fp16 on the card: _softmax(half_to_float), no copy. cpu: the bf16 output.
TEST(CardAutocast, SoftmaxReturnsFp32OnTheCardCopyingOnlyABf16Input) {
  for (const at::ScalarType lower : {at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(c10::toString(lower));
    const at::Tensor scores = at::empty({kB, 32}, kMeta.dtype(lower)).requires_grad_(true);
    const auto softmax = [&] { return at::softmax(scores, -1); };
    const Bytes card = UnderAutocast(kT4, lower, softmax);
    EXPECT_EQ(card.left, kB * 32 * 4);
    EXPECT_EQ(card.peak, lower == at::kHalf ? kB * 32 * 4 : kB * 32 * 4 * 2);
    EXPECT_EQ(UnderAutocast(KernelTarget::Cpu(), lower, softmax).left, kB * 32 * 2);
  }
}

// The catalog's autocast scenario (scenarios/autocast-bf16.json) on a T4's kernels against meta with
// cpu's: what the forward keeps differs by exactly the differences above that its models hit, at
// their shapes. fp32 keeps the same bytes on both kernels (no table in play).
// - mlp (batch 512): layer_norm's fp32 copy of its bf16 [512, 512] input is kept instead of the input
//   (512 x 512 x 2 more); cross entropy's bf16 log-probabilities [512, 10] besides the fp32 ones.
// - transformer (4 x 128 tokens): every layer_norm's input is fp32 already (the embedding, the
//   residuals): no difference; softmax's fp32 probabilities [4, 4, 128, 128] for its backward beside
//   the bf16 copy the matmul keeps, where cpu's one bf16 tensor serves both; cross entropy's bf16
//   log-probabilities [512, 1000].
TEST(CardAutocast, TheCatalogsModelsKeepTheDifferencesBytes) {
  at::set_num_threads(1);
  const VariantMeasureOptions card{.backend = Backend::kMeta, .kernels = kT4};
  const VariantMeasureOptions cpu{.backend = Backend::kMeta};
  const auto saved = [](const std::string& variant, const VariantMeasureOptions& options) {
    const VariantMeasurement m = MeasureVariant(CatalogVariant("autocast-bf16", variant), options);
    EXPECT_EQ(m.outcome, VariantOutcome::Pass()) << variant << ": " << m.error;
    return m.forward_saved_bytes.value_or(-1);
  };
  EXPECT_EQ(saved("mlp_fp32", card), saved("mlp_fp32", cpu));
  EXPECT_EQ(saved("transformer_fp32", card), saved("transformer_fp32", cpu));
  EXPECT_EQ(saved("mlp_autocast", card) - saved("mlp_autocast", cpu), 512 * 512 * 2 + 512 * 10 * 2);
  // float16 (with its GradScaler): the same tables, the same differences.
  EXPECT_EQ(saved("mlp_autocast_fp16", card) - saved("mlp_autocast_fp16", cpu), 512 * 512 * 2 + 512 * 10 * 2);
  EXPECT_EQ(saved("transformer_autocast", card) - saved("transformer_autocast", cpu),
            4 * 4 * 128 * 128 * 4 + 4 * 128 * 1000 * 2);
}

// A checkpoint's recomputation replays the forward's autocast (CurrentAutocast, nn/checkpoint.cpp): on
// meta, with the table it mirrored.
TEST(CardAutocast, ARecomputationReplaysTheCardsTable) {
  const at::Tensor y16 = at::ones({4, 8}, at::TensorOptions().device(c10::kMeta).dtype(at::kBFloat16));
  std::vector<AutocastSetting> forward;
  {
    AutocastScope autocast({c10::kMeta, at::kBFloat16, c10::kCUDA});
    forward = CurrentAutocast();
  }
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_EQ(forward[0].mirrors, c10::kCUDA);
  AutocastScope recomputation(forward);
  EXPECT_EQ(at::layer_norm(y16, {8}).scalar_type(), at::kFloat);  // CUDA's table: fp32
}

// A registered workload's ctx.Autocast follows the card as loop.autocast does: its bf16 activation
// [128, 64] into a layer_norm keeps a fp32 copy (128 x 64 x 4) rather than itself (x 2) on a T4's
// kernels, and the loss, a sum, is fp32 under CUDA's table (fp32_set_opt_dtype) and bf16 under cpu's.
TEST(CardAutocast, AWorkloadsAutocastFollowsTheCard) {
  const auto workload = [](Context& ctx) {
    testing::Parameters params(ctx);
    const at::Tensor w = params.Add({64, 32}), gamma = params.Add({64}, 1.0), beta = params.Add({64});
    testing::TrainAndEvaluate(ctx, params, [&](bool) {
      const at::Tensor x = at::empty({128, 32}, ctx.options());
      auto autocast = ctx.Autocast(at::kBFloat16);
      return at::layer_norm(at::linear(x, w), {64}, gamma, beta).sum();
    });
  };
  VariantSpec spec;
  spec.name = "autocast";
  const auto saved = [&](const KernelTarget& target) {
    const VariantMeasurement m = MeasureWorkload(workload, spec, {.backend = Backend::kMeta, .kernels = target});
    EXPECT_EQ(m.outcome, VariantOutcome::Pass()) << m.error;
    return m.forward_saved_bytes.value_or(-1);
  };
  EXPECT_EQ(saved(kT4) - saved(KernelTarget::Cpu()), 128 * 64 * 2 + (4 - 2));
}

}  // namespace
}  // namespace oomguard
