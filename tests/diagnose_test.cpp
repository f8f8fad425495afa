// The detectors (diagnose/detectors.h) on the catalog's pitfalls, on registered workloads whose pitfall
// is in the user's own code, and the measured fixes (run/measured_fix.h) against manual reruns. Bytes
// are the arithmetic of each model (cpu, exact), or the same quantity measured another way by the
// ledger (live growth per iteration, retained_grad_bytes).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "allocators/ledger.h"
#include "diagnose/run_observer.h"
#include "run/measured_fix.h"
#include "scenario/scenario_loader.h"
#include "tests/catalog_variant.h"
#include "workload/workload.h"
#include "workload/workload_registry.h"

namespace oomguard {
namespace {

using ::testing::HasSubstr;

VariantMeasurement Measured(const VariantSpec& spec, Backend backend = Backend::kCpu) {
  VariantMeasureOptions options;
  options.backend = backend;
  return MeasureVariant(spec, options);
}

std::vector<std::string> Kinds(const VariantMeasurement& m) {
  std::vector<std::string> kinds;
  for (const Diagnosis& d : m.diagnoses) kinds.emplace_back(Name(d.kind));
  return kinds;
}

const Diagnosis& Only(const VariantMeasurement& m, DiagnosisKind kind) {
  static const Diagnosis none;
  EXPECT_EQ(Kinds(m), std::vector<std::string>{std::string(Name(kind))});
  for (const Diagnosis& d : m.diagnoses) {
    if (d.kind == kind) return d;
  }
  return none;
}

int64_t Growth(const VariantMeasurement& m) { return static_cast<int64_t>(*LiveGrowthPerIteration(m)); }

TEST(Diagnose, RetainedGradsAreExactlyTheIntermediatesGradients) {
  const VariantMeasurement pitfall = Measured(CatalogVariant("retained-grads", "pitfall"));
  const Diagnosis& d = Only(pitfall, DiagnosisKind::kRetainedGrad);
  EXPECT_EQ(d.bytes, 4 * 256 * 512 * 4);  // four 256 x 512 float32 intermediates
  EXPECT_EQ(d.bytes, *pitfall.retained_grad_bytes);
  EXPECT_EQ(d.count, 4);
  EXPECT_EQ(d.per, DiagnosisPer::kPhaseEnd);
  EXPECT_TRUE(Measured(CatalogVariant("retained-grads", "fixed")).diagnoses.empty());
}

TEST(Diagnose, AKeptGraphAccountsForTheWholeGrowthPerIteration) {
  const VariantMeasurement retained = Measured(CatalogVariant("retain-graph-left-on", "pitfall"));
  const Diagnosis& d = Only(retained, DiagnosisKind::kGraphKeptAcrossIterations);
  EXPECT_EQ(d.bytes, Growth(retained));  // the storages the observer saw = what the ledger grew by
  EXPECT_GT(d.count, 0);
  EXPECT_THAT(d.where, HasSubstr("NllLossBackward0"));
  // A kept loss whose graph backward already freed: the 4-byte loss, its nodes still alive.
  const VariantMeasurement train = Measured(CatalogVariant("loss-history-keeps-graph", "train_attached"));
  EXPECT_EQ(Only(train, DiagnosisKind::kGraphKeptAcrossIterations).bytes, 4);
  EXPECT_TRUE(Measured(CatalogVariant("retain-graph-left-on", "fixed")).diagnoses.empty());
  EXPECT_TRUE(Measured(CatalogVariant("loss-history-keeps-graph", "fixed")).diagnoses.empty());
}

TEST(Diagnose, EvaluationWithAutogradKeepsEachBatchsGraph) {
  const VariantMeasurement pitfall = Measured(CatalogVariant("forgotten-no-grad", "pitfall"));
  const Diagnosis& d = Only(pitfall, DiagnosisKind::kEvalKeepsGraph);
  // What the catalog measures for it: 7 to 8 batches' saved activations plus their inputs.
  EXPECT_GE(d.bytes, 7 * *pitfall.forward_saved_bytes);
  EXPECT_LE(d.bytes, 8 * (*pitfall.forward_saved_bytes + 512 * 1024));
  EXPECT_EQ(d.bytes % 8, 0);  // eight batches alike
  EXPECT_EQ(d.phase, "eval");
  EXPECT_TRUE(Measured(CatalogVariant("forgotten-no-grad", "fixed")).diagnoses.empty());
}

TEST(Diagnose, ACopyInsideACheckpointIsMadeAgainInBackward) {
  const VariantMeasurement m = Measured(CatalogVariant("h2d-in-checkpoint", "pitfall"));
  const Diagnosis& d = Only(m, DiagnosisKind::kTransferInRecompute);
  EXPECT_EQ(d.count, 1);
  EXPECT_EQ(d.bytes, 128 * 512 * 4);  // one batch per step, again
  EXPECT_EQ(d.per, DiagnosisPer::kStep);
  EXPECT_TRUE(Measured(CatalogVariant("h2d-in-checkpoint", "fixed")).diagnoses.empty());
}

TEST(Diagnose, InplaceErrorsNameTheOpAndTheNode) {
  const VariantMeasurement edited = Measured(CatalogVariant("inplace-misuse", "saved_tensor"));
  const Diagnosis& saved = Only(edited, DiagnosisKind::kInplaceOnSaved);
  EXPECT_THAT(saved.message, HasSubstr("aten::mul_"));
  EXPECT_THAT(saved.where, HasSubstr("SigmoidBackward0"));
  EXPECT_EQ(saved.bytes, 32 * 64 * 4);  // the edited [32, 64] float32 tensor: what the out-of-place fix costs
  const VariantMeasurement on_leaf = Measured(CatalogVariant("inplace-misuse", "leaf"));
  const Diagnosis& leaf = Only(on_leaf, DiagnosisKind::kInplaceOnLeaf);
  EXPECT_THAT(leaf.message, HasSubstr("aten::mul_"));
  for (const char* fine : {"unsaved", "fixed", "reference"}) {
    EXPECT_TRUE(Measured(CatalogVariant("inplace-misuse", fine)).diagnoses.empty()) << fine;
  }
}

TEST(Diagnose, UnpreservedRngInACheckpointIsFoundOnCpuAndMeta) {
  const VariantMeasurement cpu = Measured(CatalogVariant("checkpoint-dropout", "unpreserved"));
  const VariantMeasurement meta = Measured(CatalogVariant("checkpoint-dropout", "unpreserved"), Backend::kMeta);
  const Diagnosis& d = Only(cpu, DiagnosisKind::kCheckpointRng);
  EXPECT_GT(d.count, 0);
  EXPECT_EQ(d.count, Only(meta, DiagnosisKind::kCheckpointRng).count);
  EXPECT_EQ(d.bytes, Only(meta, DiagnosisKind::kCheckpointRng).bytes);
  EXPECT_TRUE(Measured(CatalogVariant("checkpoint-dropout", "preserved")).diagnoses.empty());
}

TEST(Diagnose, MeasuredFixesMatchTheFixedVariants) {
  const VariantSpec pitfall = CatalogVariant("forgotten-no-grad", "pitfall");
  VariantMeasurement m = Measured(pitfall);
  MeasureFixes(pitfall, {}, &m);
  ASSERT_EQ(m.diagnoses.size(), 1u);
  ASSERT_EQ(m.diagnoses[0].measured.size(), 1u);
  const MeasuredFix& fix = m.diagnoses[0].measured[0];
  EXPECT_EQ(fix.fix, "loop.eval.no_grad: true");
  const VariantMeasurement fixed = Measured(CatalogVariant("forgotten-no-grad", "fixed"));
  EXPECT_EQ(fix.peak_bytes, fixed.ledger.peak_bytes);
  EXPECT_EQ(fix.live_after_bytes, fixed.iterations.back().live_after_bytes);

  const VariantSpec kept = CatalogVariant("retain-graph-left-on", "pitfall");
  VariantMeasurement k = Measured(kept);
  MeasureFixes(kept, {}, &k);
  ASSERT_EQ(k.diagnoses.at(0).measured.size(), 1u);
  EXPECT_EQ(k.diagnoses[0].measured[0].peak_bytes,
            Measured(CatalogVariant("retain-graph-left-on", "fixed")).ledger.peak_bytes);
  EXPECT_EQ(*k.diagnoses[0].measured[0].live_growth_per_iteration, 0);
}

// A user's evaluation that keeps its outputs with autograd on ("no_grad": false), or under NoGradGuard.
void EvalKeepsOutputs(Context& ctx) {
  const bool no_grad = ctx.Bool("no_grad");
  at::Tensor w = at::randn({64, 64}, ctx.options()).requires_grad_();
  ctx.Track({w});
  for (int64_t iteration : ctx.Iterations()) {
    (void)iteration;
    {
      auto phase = ctx.Phase("forward");
      at::Tensor loss = at::tanh(at::matmul(at::randn({32, 64}, ctx.options()), w)).sum();
      auto backward = ctx.Phase("backward");
      loss.backward();
    }
    w.mutable_grad().reset();
    std::vector<at::Tensor> outputs;  // declared before the phase: alive when it ends
    auto phase = ctx.Phase("eval");
    std::optional<at::NoGradGuard> guard;
    if (no_grad) guard.emplace();
    for (int b = 0; b < 3; ++b) outputs.push_back(at::tanh(at::matmul(at::randn({32, 64}, ctx.options()), w)));
  }
}

// A user's loop that keeps each loss detached in a list of its own: no graph, a leak of 4 bytes.
// The detached losses KeepsDetachedLosses keeps: a test clears them after measuring, or a later
// measurement in this process would count them as live (Workload.* in one gtest process with
// Variants/AutocastRun read 12 bytes more on cpu than on meta).
std::vector<at::Tensor> g_detached_history;

void KeepsDetachedLosses(Context& ctx) {
  std::vector<at::Tensor>& history = g_detached_history;
  history.clear();
  at::Tensor w = at::randn({16, 16}, ctx.options()).requires_grad_();
  for (int64_t iteration : ctx.Iterations()) {
    (void)iteration;
    at::Tensor loss;
    {
      auto phase = ctx.Phase("forward");
      loss = at::matmul(at::randn({8, 16}, ctx.options()), w).mean();
    }
    {
      auto phase = ctx.Phase("backward");
      loss.backward();
    }
    w.mutable_grad().reset();
    history.push_back(loss.detach());
  }
}

VariantSpec Workload(const std::string& name, Knobs knobs = {}) {
  VariantSpec v;
  v.name = "v";
  v.workload = name;
  v.knobs = std::move(knobs);
  v.loop.iterations = 3;
  return v;
}

TEST(Diagnose, AWorkloadsOwnEvaluationIsDiagnosedAndItsFixMatchesNoGradByHand) {
  ASSERT_TRUE(RegisterWorkload("diagnose_eval_keeps_outputs", EvalKeepsOutputs));
  const VariantSpec pitfall = Workload("diagnose_eval_keeps_outputs", {{"no_grad", false}});
  VariantMeasurement m = MeasureVariant(pitfall, {});
  const Diagnosis& d = Only(m, DiagnosisKind::kEvalKeepsGraph);
  // Each of the 3 outputs (tanh saves it) and the batch the matmul saved for w's gradient: 3 x 2 x 32 x 64
  // floats; the matmul's result is freed (tanh's backward needs only its output).
  EXPECT_EQ(d.bytes, 3 * 2 * 32 * 64 * 4);
  MeasureFixes(pitfall, {}, &m);
  ASSERT_EQ(m.diagnoses[0].measured.size(), 1u);
  const VariantMeasurement by_hand = MeasureVariant(Workload("diagnose_eval_keeps_outputs", {{"no_grad", true}}), {});
  EXPECT_TRUE(by_hand.diagnoses.empty());
  EXPECT_EQ(m.diagnoses[0].measured[0].peak_bytes, by_hand.ledger.peak_bytes);
  EXPECT_EQ(m.diagnoses[0].measured[0].live_after_bytes, by_hand.iterations.back().live_after_bytes);
}

TEST(Diagnose, ALeakWithoutAGraphIsALeakAttributedToItsPhase) {
  const VariantMeasurement m = MeasureWorkload(KeepsDetachedLosses, Workload("detached"), {});
  g_detached_history.clear();
  const Diagnosis& d = Only(m, DiagnosisKind::kLeak);
  EXPECT_EQ(d.bytes, 4);  // one float32 loss per iteration
  EXPECT_EQ(d.phase, "forward");
  EXPECT_EQ(d.per, DiagnosisPer::kIteration);
}

TEST(Diagnose, TheDetectorsCanBeLeftOut) {
  VariantMeasureOptions options;
  options.diagnose = false;
  const VariantMeasurement m = MeasureVariant(CatalogVariant("retained-grads", "pitfall"), options);
  EXPECT_FALSE(m.diagnosed);
  EXPECT_TRUE(m.diagnoses.empty());
}

// A run that never ends an iteration (an evaluation of many batches, a workload without ctx.Step)
// must not make the observer hold an entry per op it ever saw: it drops the freed when its maps double.
TEST(Diagnose, TheObserverStaysBoundedWithoutIterations) {
  Ledger ledger;
  RunObserver observer(ledger, nullptr, c10::DeviceType::CPU);
  const at::Tensor w = at::ones({4}).requires_grad_();
  for (int i = 0; i < 20000; ++i) {
    const at::Tensor y = w * 2;  // a node and a non-leaf tensor, freed at once
  }
  EXPECT_LE(observer.tracked(), 8192u);
  const at::Tensor kept = w * 3;
  EXPECT_GE(observer.tracked(), 1u);  // what is alive stays watched
}

}  // namespace
}  // namespace oomguard
