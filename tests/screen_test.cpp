// Note [Screen, then watch] (diagnose/run_observer.h): a run screened first, watching no operator, is
// diagnosed exactly as one watched at once, on every catalog variant, on cpu and meta; the screen names
// each pitfall's cause and none for a fixed variant, so a clean run is measured once; and it asks
// RecordFunction for nothing per operator.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "allocators/fault_injection.h"
#include "model/measurement_json.h"
#include "ops/op_stream.h"
#include "run/run_options.h"
#include "scenario/scenario_loader.h"
#include "tests/catalog_variant.h"
#include "workload/workload.h"
#include "workload/workload_registry.h"

namespace oomguard {
namespace {

using Watching = VariantMeasureOptions::Watching;

VariantMeasurement Measured(const VariantSpec& spec, Backend backend, Watching watching, Limits limits = {}) {
  VariantMeasureOptions options;
  options.backend = backend;
  options.limits = std::move(limits);
  options.watching = watching;
  return MeasureVariant(spec, options);
}

TEST(Screen, EachCatalogPitfallGivesItsCauseAndItsFixNone) {
  struct Case {
    const char* scenario;
    const char* variant;
    const char* cause;
  };
  const Case cases[] = {
      {"forgotten-no-grad", "pitfall", "eval"},
      {"forgotten-no-grad", "fixed", ""},
      {"retain-graph-left-on", "pitfall", "kept"},
      {"retain-graph-left-on", "fixed", ""},
      {"loss-history-keeps-graph", "train_attached", "kept"},
      {"loss-history-keeps-graph", "fixed", ""},
      {"retained-grads", "pitfall", "retained-grad"},
      {"retained-grads", "fixed", ""},
      {"inplace-misuse", "saved_tensor", "inplace"},
      {"inplace-misuse", "leaf", "inplace"},
      {"checkpoint-dropout", "unpreserved", "checkpoint-rng"},
      {"checkpoint-dropout", "preserved", ""},
      {"checkpoint-segments", "k4", ""},  // checkpointed without RNG state, but nothing random in it
  };
  for (const Case& c : cases) {
    // On meta, where the detectors screen by default.
    const VariantMeasurement m = Measured(CatalogVariant(c.scenario, c.variant), Backend::kMeta, Watching::kByBackend);
    ASSERT_TRUE(m.screen.has_value()) << c.scenario << "/" << c.variant;
    EXPECT_EQ(m.screen->cause, c.cause) << c.scenario << "/" << c.variant;
  }
}

TEST(Screen, TheDefaultScreensOnMetaAndWatchesAtOnceOnCpuAndWithInjectedFaults) {
  const VariantSpec spec = CatalogVariant("retained-grads", "fixed");
  EXPECT_TRUE(Measured(spec, Backend::kMeta, Watching::kByBackend).screen.has_value());
  EXPECT_FALSE(Measured(spec, Backend::kCpu, Watching::kByBackend).screen.has_value());
  EXPECT_FALSE(Measured(spec, Backend::kMeta, Watching::kAtOnce).screen.has_value());
  VariantMeasureOptions faulted;
  faulted.backend = Backend::kMeta;
  faulted.limits.faults = std::make_shared<FaultInjector>(NthAllocation(1000000));
  EXPECT_FALSE(MeasureVariant(spec, faulted).screen.has_value());  // a second run could not replay them
}

void ExpectSameDiagnoses(const VariantMeasurement& at_once, const VariantMeasurement& screened,
                         const std::string& what) {
  ASSERT_EQ(screened.diagnoses.size(), at_once.diagnoses.size()) << what;
  for (size_t i = 0; i < at_once.diagnoses.size(); ++i) {
    const Diagnosis& a = at_once.diagnoses[i];
    const Diagnosis& b = screened.diagnoses[i];
    EXPECT_EQ(Name(b.kind), Name(a.kind)) << what;
    EXPECT_EQ(b.bytes, a.bytes) << what << " " << Name(a.kind);
    EXPECT_EQ(b.per, a.per) << what;
    EXPECT_EQ(b.count, a.count) << what << " " << Name(a.kind);
    EXPECT_EQ(b.phase, a.phase) << what;
    EXPECT_EQ(b.where, a.where) << what;
    EXPECT_EQ(b.message, a.message) << what;
    EXPECT_EQ(b.event_index, a.event_index) << what << " " << Name(a.kind);
  }
}

// What only a watch of the operators can find (the rest comes from the measurement and the copies).
bool NeedsTheWatch(const Diagnosis& d) {
  return d.kind != DiagnosisKind::kActivationsDominate && d.kind != DiagnosisKind::kTransferInRecompute;
}

// Every catalog variant on `backend`: screened first, it is diagnosed as watched at once, with the same
// measurement, and it ran a second time exactly when a watch had something to find.
void ExpectEveryCatalogVariantAlike(Backend backend) {
  std::vector<std::string> files;
  std::string error;
  ASSERT_TRUE(FindScenarioFiles({std::string(OOMGUARD_SOURCE_DIR) + "/scenarios"}, &files, &error)) << error;
  int variants = 0, watched_again = 0;
  for (const std::string& file : files) {
    Scenario s;
    ASSERT_TRUE(LoadScenarioFile(file, &s, &error)) << error;
    if (std::find(s.backends.begin(), s.backends.end(), std::string(Name(backend))) == s.backends.end()) continue;
    Limits limits;  // the scenario's card or cap, as the runner gives it
    ASSERT_TRUE(ScenarioLimits(RunOptions{}, s, &limits, &error)) << error;
    for (const VariantSpec& v : s.variants) {
      const std::string what = s.name + "/" + v.name + " on " + std::string(Name(backend));
      const VariantMeasurement at_once = Measured(v, backend, Watching::kAtOnce, limits);
      const VariantMeasurement screened = Measured(v, backend, Watching::kScreenFirst, limits);
      ASSERT_TRUE(screened.screen.has_value()) << what;
      EXPECT_EQ(Name(screened.outcome), Name(at_once.outcome)) << what;
      EXPECT_EQ(screened.ledger.peak_bytes, at_once.ledger.peak_bytes) << what;
      ExpectSameDiagnoses(at_once, screened, what);
      const bool needed = std::any_of(at_once.diagnoses.begin(), at_once.diagnoses.end(), NeedsTheWatch);
      EXPECT_EQ(!screened.screen->cause.empty(), needed) << what << ": cause '" << screened.screen->cause << "'";
      EXPECT_EQ(screened.screen->watch_ms > 0, !screened.screen->cause.empty()) << what;
      ++variants;
      watched_again += screened.screen->cause.empty() ? 0 : 1;
    }
  }
  EXPECT_GE(variants, 40);
  EXPECT_GE(watched_again, 6);             // the pitfalls above
  EXPECT_LE(watched_again, variants / 2);  // and the fixed variants not
}

TEST(Screen, EveryCatalogVariantIsDiagnosedAlikeScreenedOrWatchedOnMeta) {
  ExpectEveryCatalogVariantAlike(Backend::kMeta);
}

TEST(Screen, EveryCatalogVariantIsDiagnosedAlikeScreenedOrWatchedOnCpu) {
  ExpectEveryCatalogVariantAlike(Backend::kCpu);
}

VariantSpec Workload(const std::string& name) {
  VariantSpec v;
  v.name = "v";
  v.workload = name;
  v.loop.iterations = 4;
  return v;
}

// A loop that makes the next batch while it trains on this one (a prefetching loader): iteration N's
// batch outlives N, never N+1, so nothing is kept across iterations (Note [Epochs], allocators/ledger.h).
void PrefetchesItsNextBatch(Context& ctx) {
  at::Tensor w = at::randn({32, 32}, ctx.options()).requires_grad_();
  ctx.Track({w});
  at::Tensor next;
  {
    auto phase = ctx.Phase("transfer");
    next = at::randn({16, 32}, ctx.options());
  }
  for (int64_t iteration : ctx.Iterations()) {
    (void)iteration;
    at::Tensor batch = next;
    {
      auto phase = ctx.Phase("transfer");
      next = at::randn({16, 32}, ctx.options());
    }
    at::Tensor loss;
    {
      auto phase = ctx.Phase("forward");
      loss = at::tanh(at::matmul(batch, w)).sum();
    }
    auto phase = ctx.Phase("backward");
    loss.backward();
    w.mutable_grad().reset();
  }
}

TEST(Screen, APrefetchedBatchIsNotMistakenForAKeptOne) {
  ASSERT_TRUE(RegisterWorkload("screen_prefetches", PrefetchesItsNextBatch));
  const VariantMeasurement m = Measured(Workload("screen_prefetches"), Backend::kMeta, Watching::kByBackend);
  ASSERT_TRUE(m.screen.has_value());
  EXPECT_EQ(m.screen->cause, "");
  EXPECT_EQ(m.screen->watch_ms, 0);
  EXPECT_TRUE(m.diagnoses.empty());
  EXPECT_TRUE(Measured(Workload("screen_prefetches"), Backend::kCpu, Watching::kAtOnce).diagnoses.empty());
}

// A loop that keeps each step's loss, detached, past its own run (a static history).
std::vector<at::Tensor> g_history;
void KeepsItsLossesPastTheRun(Context& ctx) {
  at::Tensor w = at::randn({8, 8}, ctx.options()).requires_grad_();
  for (int64_t iteration : ctx.Iterations()) {
    (void)iteration;
    auto phase = ctx.Phase("forward");
    g_history.push_back(at::matmul(at::randn({4, 8}, ctx.options()), w).sum().detach());
  }
}

// What an earlier run of the process left alive was booked under its epochs: the next run takes others.
TEST(Screen, TensorsAnEarlierRunLeftAliveAreNotTakenForThisRunsOwn) {
  ASSERT_TRUE(RegisterWorkload("screen_keeps_losses", KeepsItsLossesPastTheRun));
  ASSERT_TRUE(RegisterWorkload("screen_prefetches_after", PrefetchesItsNextBatch));
  // Watched at once, it runs once and leaves its losses in one pair of epochs (of three).
  const VariantMeasurement leaky = Measured(Workload("screen_keeps_losses"), Backend::kCpu, Watching::kAtOnce);
  EXPECT_TRUE(std::any_of(leaky.diagnoses.begin(), leaky.diagnoses.end(),
                          [](const Diagnosis& d) { return d.kind == DiagnosisKind::kLeak; }));
  EXPECT_EQ(g_history.size(), 4u);
  const VariantMeasurement next = Measured(Workload("screen_prefetches_after"), Backend::kCpu, Watching::kScreenFirst);
  ASSERT_TRUE(next.screen.has_value());
  EXPECT_EQ(next.screen->cause, "");
  g_history.clear();
}

// A loop that keeps a tensor per step in its optimizer phase, whose bytes may rightly outlive an
// iteration: only the live bytes' growth tells, and the watch attributes it.
void KeepsAnOptimizerTensorPerStep(Context& ctx) {
  static std::vector<at::Tensor> kept;
  kept.clear();
  for (int64_t iteration : ctx.Iterations()) {
    (void)iteration;
    auto phase = ctx.Phase("optimizer");
    kept.push_back(at::empty({4}, ctx.options()));
  }
}

TEST(Screen, GrowingLiveBytesAreWatchedEvenWhereStateMayLive) {
  ASSERT_TRUE(RegisterWorkload("screen_optimizer_growth", KeepsAnOptimizerTensorPerStep));
  const VariantSpec spec = Workload("screen_optimizer_growth");
  const VariantMeasurement screened = Measured(spec, Backend::kMeta, Watching::kByBackend);
  ASSERT_TRUE(screened.screen.has_value());
  EXPECT_EQ(screened.screen->cause, "growth");
  ASSERT_EQ(screened.diagnoses.size(), 1u);
  EXPECT_EQ(screened.diagnoses[0].kind, DiagnosisKind::kLeak);
  EXPECT_EQ(screened.diagnoses[0].bytes, 16);  // four float32 per step
  ExpectSameDiagnoses(Measured(spec, Backend::kMeta, Watching::kAtOnce), screened, "optimizer growth");
}

// What the op stream asks of LibTorch halfway through a run (on meta: on cpu the host scalars' watch
// asks for every operator's inputs, Note [Host scalars]).
OpStreamState g_stream_mid_run;
void RecordsTheOpStream(Context& ctx) {
  at::Tensor w = at::randn({8, 8}, ctx.options()).requires_grad_();
  for (int64_t iteration : ctx.Iterations()) {
    (void)iteration;
    auto phase = ctx.Phase("forward");
    at::Tensor loss = (w * 2).sum();
    g_stream_mid_run = CurrentOpStream();
  }
}

TEST(Screen, AScreenedRunAsksNothingOfEachOperator) {
  ASSERT_TRUE(RegisterWorkload("screen_records_op_stream", RecordsTheOpStream));
  const VariantSpec spec = Workload("screen_records_op_stream");
  (void)Measured(spec, Backend::kMeta, Watching::kByBackend);
  EXPECT_FALSE(g_stream_mid_run.needs.op_starts);
  EXPECT_FALSE(g_stream_mid_run.needs.op_ends);
  EXPECT_FALSE(g_stream_mid_run.needs.outputs);
  EXPECT_TRUE(g_stream_mid_run.needs.backward_nodes);  // the retain_grad() hooks
  (void)Measured(spec, Backend::kMeta, Watching::kAtOnce);
  EXPECT_TRUE(g_stream_mid_run.needs.op_ends);
  EXPECT_TRUE(g_stream_mid_run.needs.outputs);
}

TEST(Screen, TheResultsJsonSaysWhatTheScreenFoundAndWhatTheWatchCost) {
  const VariantMeasurement m =
      Measured(CatalogVariant("forgotten-no-grad", "pitfall"), Backend::kMeta, Watching::kByBackend);
  const nlohmann::json j = MeasurementToJson(m);
  ASSERT_TRUE(j.contains("screen"));
  EXPECT_EQ(j["screen"]["cause"], "eval");
  EXPECT_GT(j["screen"]["watch_ms"].get<double>(), 0);
  EXPECT_LT(j["screen"]["watch_ms"].get<double>(), m.duration_ms);
  VariantMeasurement back;
  std::string error;
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  ASSERT_TRUE(back.screen.has_value());
  EXPECT_EQ(back.screen->cause, "eval");
  EXPECT_EQ(back.screen->watch_ms, m.screen->watch_ms);
  EXPECT_FALSE(
      MeasurementToJson(Measured(CatalogVariant("forgotten-no-grad", "pitfall"), Backend::kCpu, Watching::kByBackend))
          .contains("screen"));
}

}  // namespace
}  // namespace oomguard
