// Note [The step that repeats] (workload/loop/steady_state.h): a run whose optimizer keeps state runs at
// least two iterations and says so; a workload's optimizer state is read while the optimizer lives; a
// workload without ctx.Iterations() is one run, with a warning, and a stated "leak": false is not
// judged on it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include "oomguard/gtest.h"
#include "oomguard/measure.h"
#include "verdict/verdict.h"
#include "workload/loop/steady_state.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

using ::testing::HasSubstr;

TEST(StepThatRepeats, OneIterationWithAStatefulOptimizerIsRaisedToTwo) {
  LoopSpec loop;
  loop.optimizer.kind = "adamw";
  StepThatRepeats s = StepThatRepeatsForLoop(loop, 1);
  EXPECT_EQ(s.iterations, 2);
  EXPECT_TRUE(s.raised());
  EXPECT_EQ(s.note, "2 iterations, not 1: adamw keeps state from its first step on, so the step that repeats is the "
                    "second");
  s = StepThatRepeatsForLoop(loop, 3);
  EXPECT_EQ(s.iterations, 3);
  EXPECT_FALSE(s.raised());
  EXPECT_EQ(s.note, "from iteration 2: adamw keeps state from its first step on");
  loop.optimizer.kind = "sgd";
  EXPECT_EQ(StepThatRepeatsForLoop(loop, 1).iterations, 1);
  EXPECT_EQ(StepThatRepeatsForLoop(loop, 1).note, "every iteration: sgd without momentum keeps no state");
  loop.optimizer.momentum = 0.9;
  EXPECT_EQ(StepThatRepeatsForLoop(loop, 1).iterations, 2);
  loop.backward = false;
  EXPECT_EQ(StepThatRepeatsForLoop(loop, 1).iterations, 1);
  EXPECT_EQ(StepThatRepeatsForLoop(loop, 1).note,
            "every iteration: the loop takes no optimizer step (loop.backward false)");
}

VariantSpec Mlp(const std::string& optimizer, int64_t iterations) {
  VariantSpec v;
  v.name = "v";
  v.model.layers = {LayerSpec{.kind = "linear", .in = 64, .out = 64}};
  v.data.batch = 8;
  v.data.shape = {64};
  v.loop.iterations = iterations;
  v.loop.optimizer.kind = optimizer;
  return v;
}

TEST(StepThatRepeats, ALayerListWithAdamwAskedForOneIterationRunsTwoAndSaysSo) {
  const VariantMeasurement adamw = MeasureVariant(Mlp("adamw", 1), {});
  ASSERT_EQ(Name(adamw.outcome), "pass") << adamw.error;
  EXPECT_EQ(adamw.iterations.size(), 2u);
  EXPECT_TRUE(adamw.iterations_raised);
  // The second step's forward runs beside AdamW's state (2 x 4 x (64 x 64 + 64) bytes): the peak of
  // the step that repeats is above the first step's.
  EXPECT_EQ(*adamw.optimizer_state_bytes, 2 * 4 * (64 * 64 + 64));
  EXPECT_GT(adamw.iterations[1].peak_bytes, adamw.iterations[0].peak_bytes);
  const VariantMeasurement sgd = MeasureVariant(Mlp("sgd", 1), {});
  EXPECT_EQ(sgd.iterations.size(), 1u);
  EXPECT_FALSE(sgd.iterations_raised);
  // --iterations 1 (the options' override) is raised the same way.
  VariantMeasureOptions one;
  one.iterations = 1;
  EXPECT_EQ(MeasureVariant(Mlp("adam", 3), one).iterations.size(), 2u);
}

// The step the workload took: zero_grad(set_to_none) inside the optimizer phase frees the
// gradients as the step builds Adam's state, so the phase's growth is half the state.
void AdamStep(Context& ctx, torch::optim::Adam& adam, const at::Tensor& w) {
  at::Tensor loss;
  {
    auto phase = ctx.Phase("forward");
    loss = at::matmul(at::ones({8, 64}, ctx.options()), w).sum();
  }
  {
    auto phase = ctx.Phase("backward");
    loss.backward();
  }
  auto phase = ctx.Phase("optimizer");
  adam.step();
  adam.zero_grad(/*set_to_none=*/true);
}

TEST(StepThatRepeats, AWorkloadWithoutIterationsGetsItsOptimizerStateRightAndAWarning) {
  const auto without_iterations = [](Context& ctx) {
    at::Tensor w = at::zeros({64, 64}, ctx.options()).requires_grad_();
    torch::optim::Adam adam({w}, torch::optim::AdamOptions(1e-3));
    ctx.Track({w});
    ctx.Track(adam);
    AdamStep(ctx, adam, w);
    AdamStep(ctx, adam, w);
  };
  const VariantMeasurement m = MeasureWorkload(without_iterations, VariantSpec{.name = "v"}, {});
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  EXPECT_EQ(m.optimizer_state_bytes, 2 * 64 * 64 * 4);  // exp_avg and exp_avg_sq, not their growth net of the grads
  EXPECT_EQ(m.steady_state, "one run: the workload never calls ctx.Iterations()");
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_THAT(m.warnings[0], HasSubstr("the workload never calls ctx.Iterations(), so it is measured as one run"));

  // A stated "leak": false cannot pass on it; the default is not a statement.
  VariantEvidence e;
  e.name = "v";
  e.measurement = m;
  EXPECT_EQ(JudgeVariant(e).code, ResultCode::kPass);
  e.expectation.leak_stated = true;
  EXPECT_EQ(JudgeVariant(e).reasons,
            std::vector<std::string>{"\"leak\": false cannot be judged: growth takes at least 2 completed iterations, "
                                     "and the run completed 0 (one run: the workload never calls ctx.Iterations())"});
}

TEST(StepThatRepeats, AWorkloadTrackingAdamIsRaisedToTwoIterations) {
  const auto one_loop = [](Context& ctx) {
    at::Tensor w = at::zeros({64, 64}, ctx.options()).requires_grad_();
    torch::optim::Adam adam({w}, torch::optim::AdamOptions(1e-3));
    ctx.Track({w});
    ctx.Track(adam);
    for ([[maybe_unused]] int64_t i : ctx.Iterations()) AdamStep(ctx, adam, w);
  };
  VariantMeasureOptions one;
  one.iterations = 1;
  const VariantMeasurement m = MeasureWorkload(one_loop, VariantSpec{.name = "v"}, one);
  EXPECT_EQ(m.iterations.size(), 2u);
  EXPECT_EQ(m.steady_state,
            "2 iterations, not 1: Adam keeps state from its first step on, so the step that repeats is the second");
  // Without a tracked optimizer oomguard cannot know, and says so.
  const VariantMeasurement untracked = MeasureWorkload(
      [](Context& ctx) {
        for ([[maybe_unused]] int64_t i : ctx.Iterations()) {
        }
      },
      VariantSpec{.name = "v"}, one);
  EXPECT_EQ(untracked.iterations.size(), 1u);
  EXPECT_THAT(untracked.steady_state, HasSubstr("1 iteration and no optimizer tracked"));
}

TEST(Matchers, FitsCardOfAnUnknownCardFailsTheExpectationWithTheReason) {
  Measurement m;
  m.outcome = "pass";
  const ::testing::Matcher<const Measurement&> matcher = FitsCard("x100");  // does not throw
  ::testing::StringMatchResultListener why;
  EXPECT_FALSE(matcher.MatchAndExplain(m, &why));
  EXPECT_THAT(why.str(), HasSubstr("FitsCard(\"x100\"): "));
  EXPECT_THAT(why.str(), HasSubstr("x100"));
}

}  // namespace
}  // namespace oomguard
