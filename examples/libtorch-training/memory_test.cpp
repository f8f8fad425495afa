// The classifier's memory as unit tests: exact bytes on cpu, a large batch on meta.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <oomguard/gtest.h>
#include <oomguard/measure.h>

namespace {

using oomguard::Measure;

// 784 x 2048 + 2048 (first linear) + 2 x 2048 (layer norm) + 2048 x 10 + 10 (second linear) floats.
constexpr int64_t kParameterBytes = (784 * 2048 + 2048 + 2 * 2048 + 2048 * 10 + 10) * 4;

oomguard::MeasureOptions Options(bool eval_no_grad, int64_t batch = 256, const std::string& backend = "cpu") {
  return {.backend = backend,
          .iterations = backend == "meta" ? 1 : 2,
          .knobs = {{"batch", batch}, {"eval_no_grad", eval_no_grad}}};
}

TEST(ClassifierMemory, ParametersGradientsAndAdamStateAreExact) {
  const oomguard::Measurement m = Measure("classifier_adam", Options(true));
  ASSERT_THAT(m, oomguard::Passes());
  EXPECT_EQ(m.parameter_bytes, kParameterBytes);
  EXPECT_EQ(m.gradient_bytes, kParameterBytes);
  EXPECT_EQ(m.optimizer_state_bytes, 2 * kParameterBytes);  // Adam's exp_avg and exp_avg_sq
}

TEST(ClassifierMemory, TheFixFitsAT4AndDoesNotLeak) {
  const oomguard::Measurement m = Measure("classifier_adam", Options(true));
  EXPECT_THAT(m, oomguard::FitsCard("t4"));
  EXPECT_THAT(m, oomguard::DoesNotLeak());
  // Under no_grad evaluation saves nothing: it peaks below Adam's step.
  EXPECT_THAT(m, oomguard::PhasePeakIsAtMost("eval", m.phase_peak_bytes.at("optimizer")));
}

TEST(ClassifierMemory, EvaluationWithoutNoGradKeepsEveryBatchsGraph) {
  const oomguard::Measurement fixed = Measure("classifier_adam", Options(true));
  const oomguard::Measurement pitfall = Measure("classifier_adam", Options(false));
  ASSERT_THAT(pitfall, oomguard::Passes());
  // Eight evaluation batches each keep more than half of what a training forward saves (evaluation
  // has no dropout mask to save): over four training forwards' worth in all.
  EXPECT_GE(pitfall.phase_peak_bytes.at("eval") - fixed.phase_peak_bytes.at("eval"), 4 * *pitfall.forward_saved_bytes);
  EXPECT_THAT(pitfall, ::testing::Not(oomguard::PhasePeakIsAtMost("eval", fixed.phase_peak_bytes.at("eval"))));
  // oomguard's detectors name the pitfall; the fix has none.
  EXPECT_THAT(pitfall, oomguard::HasDiagnosis("eval-keeps-graph"));
  EXPECT_THAT(fixed, oomguard::HasNoPitfalls());
}

TEST(ClassifierMemory, ABatchOf524288RunsOutOfMemoryOnAT4) {
  // Shapes only: meta measures a batch the host could not train in a test's time (its peak: about 21.5 GiB, in
  // backward).
  const oomguard::Measurement m = Measure("classifier_adam", Options(true, 524288, "meta"));
  EXPECT_THAT(m, oomguard::RunsOutOfMemoryAt(oomguard::CardCapBytes("t4")));
  EXPECT_THAT(m, ::testing::Not(oomguard::FitsCard("t4")));
}

}  // namespace
