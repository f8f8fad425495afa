// loop.autocast and loop.clip_grad_norm: meta's autocast mirrors AutocastCPU (its operator table,
// its casts, its weight cache), so a meta run allocates what the cpu run does, with checkpointing and
// float16 loss scaling too; clipping allocates a few scalars, counted to the byte.
#include "nn/autocast/autocast.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "backends/meta/meta_item.h"
#include "backends/meta/kernels/meta_kernels.h"
#include "nn/autocast/meta_autocast.h"
#include "tests/same_bytes.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

LayerSpec Linear(int64_t in, int64_t out) {
  LayerSpec l;
  l.kind = "linear";
  l.in = in;
  l.out = out;
  return l;
}
LayerSpec Kind(const std::string& kind, int64_t dim = 0) {
  LayerSpec l;
  l.kind = kind;
  l.dim = dim;
  return l;
}

// Note: at batch 32 and 64 the backward phase's peak on meta is 256 bytes above cpu's under autocast
// (the overall peak, allocations and bytes agree); from batch 128 on every number agrees. Open.
// A 4-layer MLP (linear, gelu, layer_norm, linear, tanh, linear) with Adam and cross entropy.
VariantSpec Mlp(const std::string& name) {
  VariantSpec spec;
  spec.name = name;
  spec.model.layers = {Linear(64, 128),  Kind("gelu"), Kind("layer_norm", 128),
                       Linear(128, 128), Kind("tanh"), Linear(128, 10)};
  spec.data.batch = 128;
  spec.data.shape = {64};
  spec.data.classes = 10;
  spec.loop.loss = "cross_entropy";
  spec.loop.optimizer.kind = "adam";
  spec.seed = 3;
  return spec;
}

TEST(MetaAutocast, TheTableIsAutocastCpusOperators) {
  std::set<std::string> cpu;
  for (const c10::OperatorName& op :
       c10::Dispatcher::singleton().getAllOpNamesForDispatchKey(c10::DispatchKey::AutocastCPU)) {
    cpu.insert(op.overload_name.empty() ? op.name : op.name + "." + op.overload_name);
  }
  const std::vector<std::string> table = MetaAutocastOperators(c10::kCPU);
  const std::set<std::string> ours(table.begin(), table.end());
  EXPECT_EQ(ours.size(), table.size()) << "an operator is listed twice";
  EXPECT_EQ(ours, cpu) << "the pinned torch's AutocastCPU table changed: update kCpu in "
                          "nn/autocast/autocast_table_cpu.cpp";
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCPU, "linear"), AutocastPolicy::kLowerPrecision);
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCPU, "cross_entropy_loss"), AutocastPolicy::kFloat32);
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCPU, "cat"), AutocastPolicy::kPromote);
  EXPECT_EQ(MetaAutocastPolicyOf(c10::kCPU, "relu"), std::nullopt);
}

// The dtype each op returns under autocast, on one device.
std::vector<at::ScalarType> DtypesUnderAutocast(c10::DeviceType device, at::ScalarType lower) {
  RegisterMetaKernels();
  const at::TensorOptions o = at::TensorOptions().device(device);
  const at::Tensor x = at::ones({4, 8}, o), w = at::ones({3, 8}, o), y16 = at::ones({4, 8}, o.dtype(lower));
  const at::Tensor d = at::ones({4, 4}, o.dtype(at::kDouble));
  AutocastScope autocast({device, lower});
  return {
      at::linear(x, w).scalar_type(),                 // lower precision
      at::einsum("ij,kj->ik", {x, w}).scalar_type(),  // not listed: reaches bmm, which casts
      at::relu(x).scalar_type(),                      // not listed: as it is
      at::mse_loss(y16, y16).scalar_type(),           // fp32
      at::cat({y16, x}).scalar_type(),                // promote: the widest
      at::cat({y16, y16}).scalar_type(),              // promote from the lower type
      at::mm(d, d).scalar_type(),                     // double is never cast
      at::layer_norm(y16, {8}).scalar_type(),         // fp32 on cuda, not on cpu
      at::softmax(x, 1).scalar_type(),                // not listed on cpu
      at::matmul(x, w.t()).scalar_type(),             // lower precision
  };
}

TEST(MetaAutocast, CastsEachOpAsAutocastCpuDoes) {
  for (const at::ScalarType lower : {at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(c10::toString(lower));
    const std::vector<at::ScalarType> cpu = DtypesUnderAutocast(c10::kCPU, lower);
    EXPECT_EQ(DtypesUnderAutocast(c10::kMeta, lower), cpu);
    EXPECT_EQ(cpu[0], lower);
    EXPECT_EQ(cpu[3], at::kFloat);
    EXPECT_EQ(cpu[4], at::kFloat);
    EXPECT_EQ(cpu[5], lower);
    EXPECT_EQ(cpu[6], at::kDouble);
  }
  EXPECT_FALSE(MetaAutocastDtype().has_value()) << "the scope left autocast on";
}

TEST(MetaAutocast, CachesAWeightsCastUntilTheOutermostScopeExits) {
  const at::Tensor w = at::ones({3, 8}, at::TensorOptions().device(c10::kMeta)).requires_grad_(true);
  const at::Tensor x = at::ones({4, 8}, at::TensorOptions().device(c10::kMeta));
  at::Tensor first, second, after;
  {
    AutocastScope outer({c10::kMeta, at::kBFloat16});
    {
      AutocastScope inner({c10::kMeta, at::kBFloat16});
      first = at::linear(x, w);
    }
    second = at::linear(x, w);
  }
  {
    AutocastScope again({c10::kMeta, at::kBFloat16});
    after = at::linear(x, w);
  }
  // The cast weight is the second input of the linear's backward (mm's mat2 is w^T cast): the same
  // cast node while the cache lives, a new one after the outermost exit.
  const auto cast_of = [&w](const at::Tensor& out) {
    // The weight's cast: the ToCopyBackward node whose next edge is w's AccumulateGrad.
    const torch::autograd::Node* w_leaf = torch::autograd::impl::grad_accumulator(w).get();
    std::vector<torch::autograd::Node*> stack{out.grad_fn().get()};
    while (!stack.empty()) {
      torch::autograd::Node* node = stack.back();
      stack.pop_back();
      for (const torch::autograd::Edge& e : node->next_edges()) {
        if (!e.function) continue;
        if (e.function.get() == w_leaf && node->name().find("ToCopyBackward") != std::string::npos) return node;
        stack.push_back(e.function.get());
      }
    }
    return static_cast<torch::autograd::Node*>(nullptr);
  };
  ASSERT_NE(cast_of(first), nullptr);
  EXPECT_EQ(cast_of(first), cast_of(second));
  EXPECT_NE(cast_of(first), cast_of(after));
}

TEST(MetaItem, ReadsZeroInsideItsScopeAndThrowsOutside) {
  const at::Tensor t = at::ones({}, at::TensorOptions().device(c10::kMeta));
  EXPECT_THROW(t.item<float>(), c10::Error);
  {
    MetaItemScope unknown;
    EXPECT_EQ(t.item<float>(), 0.0f);
  }
  EXPECT_THROW(t.item<float>(), c10::Error);
}

class AutocastRun : public ::testing::TestWithParam<std::string> {};

// The same training on cpu (LibTorch's autocast) and meta (meta_autocast) allocates the same bytes.
TEST_P(AutocastRun, CpuAndMetaAllocateTheSameBytes) {
  at::set_num_threads(1);
  VariantSpec spec = Mlp(GetParam());
  const std::string& name = GetParam();
  spec.loop.autocast = name.find("fp16") != std::string::npos ? "float16" : "bfloat16";
  if (name.find("checkpoint") != std::string::npos) spec.pitfalls.checkpoint.segments = 2;
  if (name.find("clip") != std::string::npos) spec.loop.clip_grad_norm = 1.0;
  if (name.find("eval") != std::string::npos) spec.loop.eval.batches = 2;
  const VariantMeasurement cpu = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kCpu});
  const VariantMeasurement meta = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kMeta});
  ASSERT_EQ(cpu.outcome, VariantOutcome::Pass()) << cpu.error;
  ASSERT_EQ(meta.outcome, VariantOutcome::Pass()) << meta.error;
  EXPECT_TRUE(cpu.warnings.empty()) << cpu.warnings.front();
  testing::ExpectSameBytes(cpu, meta);
}

INSTANTIATE_TEST_SUITE_P(Variants, AutocastRun,
                         ::testing::Values("bf16", "fp16", "bf16_checkpoint", "fp16_clip", "bf16_eval"));

// Autocast keeps fp32 master weights: parameters, gradients and Adam state are those of fp32 training.
TEST(Autocast, KeepsParametersGradientsAndOptimizerStateInFp32) {
  at::set_num_threads(1);
  VariantSpec fp32 = Mlp("fp32");
  VariantSpec bf16 = Mlp("bf16");
  bf16.loop.autocast = "bfloat16";
  const VariantMeasurement a = MeasureVariant(fp32, VariantMeasureOptions{.backend = Backend::kCpu});
  const VariantMeasurement b = MeasureVariant(bf16, VariantMeasureOptions{.backend = Backend::kCpu});
  ASSERT_TRUE(a.outcome == VariantOutcome::Pass() && b.outcome == VariantOutcome::Pass()) << a.error << b.error;
  EXPECT_EQ(a.param_bytes, b.param_bytes);  // fp32 master weights
  EXPECT_EQ(*a.grad_bytes, *b.grad_bytes);  // fp32 gradients
  EXPECT_EQ(*a.optimizer_state_bytes, *b.optimizer_state_bytes);
  EXPECT_NE(a.grad_digest, b.grad_digest);  // the gradients were computed in bf16
}

// Checkpointing under autocast recomputes under autocast: the gradients equal those of the same
// autocast training without checkpointing, bit for bit.
TEST(Autocast, CheckpointRecomputesUnderTheForwardsAutocast) {
  at::set_num_threads(1);
  VariantSpec plain = Mlp("plain");
  plain.loop.autocast = "bfloat16";
  VariantSpec checkpointed = plain;
  checkpointed.pitfalls.checkpoint.segments = 3;
  const VariantMeasurement a = MeasureVariant(plain, VariantMeasureOptions{.backend = Backend::kCpu});
  const VariantMeasurement b = MeasureVariant(checkpointed, VariantMeasureOptions{.backend = Backend::kCpu});
  ASSERT_TRUE(a.outcome == VariantOutcome::Pass() && b.outcome == VariantOutcome::Pass()) << a.error << b.error;
  EXPECT_EQ(a.grad_digest, b.grad_digest);
  EXPECT_LT(*b.forward_saved_bytes, *a.forward_saved_bytes);
}

// clip_grad_norm_ on P gradients allocates P 0-d float norms and their stack (P floats), whose norm is
// the total: its peak, 4 bytes each; total + 1e-6, the coefficient and its clamp come after the stack
// is freed, and the gradients are scaled in place.
TEST(ClipGradNorm, AllocatesScalarsNotACopyOfTheGradients) {
  at::set_num_threads(1);
  VariantSpec spec = Mlp("clip");
  spec.loop.clip_grad_norm = 0.5;
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    const VariantMeasurement m = MeasureVariant(spec, VariantMeasureOptions{.backend = backend});
    ASSERT_EQ(m.outcome, VariantOutcome::Pass()) << m.error;
    const int64_t p = 8;  // 3 linears (weight, bias) + layer_norm (weight, bias)
    ASSERT_TRUE(m.clip_grad_norm_bytes.has_value());
    EXPECT_EQ(*m.clip_grad_norm_bytes, 4 * p + 4 * p + 4) << Name(backend);
    EXPECT_LT(*m.clip_grad_norm_bytes, *m.grad_bytes / 1000);
  }
  const VariantMeasurement unclipped = MeasureVariant(Mlp("plain"), VariantMeasureOptions{.backend = Backend::kCpu});
  EXPECT_FALSE(unclipped.clip_grad_norm_bytes.has_value());
}

// Without an optimizer, clipping still runs (in an optimizer phase of its own); without either, a
// step has no optimizer phase at all.
TEST(ClipGradNorm, RunsWithoutAnOptimizerAndOtherwiseNoOptimizerPhaseAppears) {
  at::set_num_threads(1);
  const auto has_optimizer_phase = [](const VariantMeasurement& m) {
    return std::any_of(m.ledger.phase_peaks.begin(), m.ledger.phase_peaks.end(),
                       [](const PhasePeak& p) { return p.phase == "optimizer"; });
  };
  VariantSpec spec = Mlp("no_optimizer");
  spec.loop.optimizer.kind = "none";
  const VariantMeasurement plain = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kCpu});
  ASSERT_EQ(plain.outcome, VariantOutcome::Pass()) << plain.error;
  EXPECT_FALSE(has_optimizer_phase(plain));
  spec.loop.clip_grad_norm = 1.0;
  const VariantMeasurement clipped = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kCpu});
  ASSERT_EQ(clipped.outcome, VariantOutcome::Pass()) << clipped.error;
  EXPECT_TRUE(has_optimizer_phase(clipped));
  EXPECT_EQ(clipped.clip_grad_norm_bytes, 8 * 4 + 8 * 4 + 4);
}

}  // namespace
}  // namespace oomguard
