#include "scenario/check_expression.h"

#include <gtest/gtest.h>

#include <map>

#include "verdict/check_evaluator.h"

namespace oomguard {
namespace {

constexpr double kMiB = 1048576.0;

// A fake run: measurements by "variant.metric"; every question asked is recorded.
struct FakeRun {
  std::map<std::string, MetricValue> values;
  std::vector<std::string> asked;

  void Set(const std::string& name, double number) { values[name] = MetricValue{false, number, ""}; }
  void SetDigest(const std::string& name, const std::string& digest) { values[name] = MetricValue{true, 0, digest}; }
  MetricLookup Lookup() {
    return [this](const std::string& variant, const std::string& metric) -> std::optional<MetricValue> {
      asked.push_back(variant + "." + metric);
      auto it = values.find(variant + "." + metric);
      if (it == values.end()) return std::nullopt;
      return it->second;
    };
  }
};

CheckExpression Parse(const std::string& text, bool relation_mode) {
  CheckExpression expression;
  std::string error;
  EXPECT_TRUE(ParseCheckExpression(text, relation_mode, &expression, &error)) << text << ": " << error;
  return expression;
}

std::string ParseError(const std::string& text, bool relation_mode) {
  CheckExpression expression;
  std::string error;
  EXPECT_FALSE(ParseCheckExpression(text, relation_mode, &expression, &error)) << text;
  return error;
}

// Evaluates a check made only of literals.
CheckOutcome Literal(const std::string& text) {
  FakeRun run;
  return EvaluateCheck(Parse(text, false), "v", run.Lookup());
}

TEST(CheckExpression, MultiplicationBindsTighterThanAdditionAndSubtractionIsLeftAssociative) {
  EXPECT_TRUE(Literal("1 + 2 * 3 == 7").holds);
  EXPECT_TRUE(Literal("(1 + 2) * 3 == 9").holds);
  EXPECT_TRUE(Literal("10 - 2 - 3 == 5").holds);
  EXPECT_TRUE(Literal("10 - (2 + 3) == 5").holds);
  EXPECT_TRUE(Literal("2 * (3 - 1) * 2 == 8").holds);
  EXPECT_EQ(Parse("(1+2)*3==9", false).text(), "(1 + 2) * 3 == 9");
  EXPECT_EQ(Parse("10-(2+3)  ==5", false).text(), "10 - (2 + 3) == 5");
  EXPECT_EQ(Parse("((peak)) <= 2*(1+1)", false).text(), "peak <= 2 * (1 + 1)");
  EXPECT_EQ(Literal("1 + 2 * 3 == 7").explanation, "1 + 2 * 3 == 7: 1 + 2 * 3 (7) == 7");
}

TEST(CheckExpression, ANumberFollowedByAUnitIsOneByteLiteral) {
  EXPECT_TRUE(Literal("12MiB == 12582912").holds);
  EXPECT_TRUE(Literal("1.5KiB == 1536").holds);
  EXPECT_TRUE(Literal("15.5GB == 15500000000").holds);
  EXPECT_TRUE(Literal("1e9 == 1000000000").holds);
  EXPECT_TRUE(Literal("2.5e3MB == 2.5GB").holds);
  EXPECT_TRUE(Literal("1gib == 1024MiB").holds);
  EXPECT_TRUE(Literal("0.5 * 2KiB == 1024").holds);
  EXPECT_FALSE(Literal("12MiB != 12582912").holds);
}

TEST(CheckExpression, ComparisonsAreExact) {
  EXPECT_TRUE(Literal("9007199254740992 > 9007199254740991").holds);
  EXPECT_TRUE(Literal("3 <= 3").holds);
  EXPECT_FALSE(Literal("3 < 3").holds);
  EXPECT_TRUE(Literal("3 >= 3").holds);
  EXPECT_FALSE(Literal("3 > 3").holds);
}

TEST(CheckExpression, ExplainsARelationWithFormattedBytes) {
  FakeRun run;
  run.Set("pitfall.phase_peak.eval", 12 * kMiB);
  run.Set("fixed.phase_peak.eval", 2 * kMiB);
  CheckOutcome outcome =
      EvaluateCheck(Parse("pitfall.phase_peak.eval >= 3 * fixed.phase_peak.eval", true), "", run.Lookup());
  EXPECT_TRUE(outcome.evaluable);
  EXPECT_TRUE(outcome.holds);
  EXPECT_EQ(outcome.explanation,
            "pitfall.phase_peak.eval >= 3 * fixed.phase_peak.eval: 12.00 MiB >= 3 * 2.00 MiB (6.00 MiB)");
  EXPECT_EQ(run.asked, (std::vector<std::string>{"pitfall.phase_peak.eval", "fixed.phase_peak.eval"}));
}

TEST(CheckExpression, ExplainsDifferencesAndCounts) {
  FakeRun run;
  run.Set("pitfall.live_after_last", 5 * kMiB);
  run.Set("fixed.live_after_last", 3 * kMiB);
  run.Set("pitfall.retained_grad_bytes", 2 * kMiB);
  run.Set("pitfall.transfers", 4);
  run.Set("fixed.transfers", 2);
  CheckOutcome difference = EvaluateCheck(
      Parse("pitfall.live_after_last - fixed.live_after_last == pitfall.retained_grad_bytes", true), "", run.Lookup());
  EXPECT_TRUE(difference.holds);
  EXPECT_EQ(difference.explanation,
            "pitfall.live_after_last - fixed.live_after_last == pitfall.retained_grad_bytes: "
            "5.00 MiB - 3.00 MiB (2.00 MiB) == 2.00 MiB");
  CheckOutcome counts = EvaluateCheck(Parse("pitfall.transfers == 2 * fixed.transfers", true), "", run.Lookup());
  EXPECT_TRUE(counts.holds);
  EXPECT_EQ(counts.explanation, "pitfall.transfers == 2 * fixed.transfers: 4 == 2 * 2 (4)");
}

TEST(CheckExpression, BareMetricsAreLookedUpInTheVariantBeingChecked) {
  FakeRun run;
  run.Set("pitfall.peak", 10 * kMiB);
  run.Set("pitfall.transfers_per_step", 2);
  run.Set("pitfall.live_growth_per_iteration", -1.5 * kMiB);
  run.Set("pitfall.live_after[2]", 512);
  run.Set("pitfall.phase_peak.eval", 3 * kMiB);
  run.Set("pitfall.phase_peak.forward", 2 * kMiB);
  auto check = [&](const std::string& text) { return EvaluateCheck(Parse(text, false), "pitfall", run.Lookup()); };
  EXPECT_EQ(check("peak <= 12MiB").explanation, "peak <= 12MiB: 10.00 MiB <= 12MiB");
  EXPECT_TRUE(check("peak <= 12MiB").holds);
  EXPECT_EQ(check("transfers_per_step == 2").explanation, "transfers_per_step == 2: 2 == 2");
  EXPECT_FALSE(check("live_growth_per_iteration == 0").holds);
  EXPECT_EQ(check("live_growth_per_iteration == 0").explanation, "live_growth_per_iteration == 0: -1.50 MiB == 0");
  EXPECT_EQ(check("live_after[2] < 1KiB").explanation, "live_after[2] < 1KiB: 512 bytes < 1KiB");
  CheckOutcome phases = check("phase_peak.eval < 2 * phase_peak.forward");
  EXPECT_TRUE(phases.holds);
  EXPECT_EQ(phases.explanation, "phase_peak.eval < 2 * phase_peak.forward: 3.00 MiB < 2 * 2.00 MiB (4.00 MiB)");
  EXPECT_EQ(run.asked.back(), "pitfall.phase_peak.forward");
}

TEST(CheckExpression, ShowsExactBytesWhenRoundingWouldHideTheDifference) {
  FakeRun run;
  run.Set("v.peak", 12 * kMiB + 1);
  run.Set("v.grad_bytes", 6 * kMiB);
  EXPECT_EQ(EvaluateCheck(Parse("peak <= 12MiB", false), "v", run.Lookup()).explanation,
            "peak <= 12MiB: 12582913 bytes <= 12MiB (12582912 bytes)");
  EXPECT_EQ(EvaluateCheck(Parse("peak == 2 * grad_bytes", false), "v", run.Lookup()).explanation,
            "peak == 2 * grad_bytes: 12582913 bytes == 2 * 6291456 bytes (12582912 bytes)");
}

TEST(CheckExpression, ComparesDigestsForEqualityOnly) {
  FakeRun run;
  run.SetDigest("preserved.grads", "9f86d081884c7d65");
  run.SetDigest("reference.grads", "9f86d081884c7d65");
  run.SetDigest("unpreserved.grads", "60303ae22b998861");
  CheckOutcome same = EvaluateCheck(Parse("preserved.grads == reference.grads", true), "", run.Lookup());
  EXPECT_TRUE(same.evaluable);
  EXPECT_TRUE(same.holds);
  EXPECT_EQ(same.explanation, "preserved.grads == reference.grads: 9f86d081884c7d65 == 9f86d081884c7d65");
  CheckOutcome differ = EvaluateCheck(Parse("unpreserved.grads != reference.grads", true), "", run.Lookup());
  EXPECT_TRUE(differ.holds);
  EXPECT_EQ(differ.explanation, "unpreserved.grads != reference.grads: 60303ae22b998861 != 9f86d081884c7d65");
  EXPECT_FALSE(EvaluateCheck(Parse("unpreserved.grads == reference.grads", true), "", run.Lookup()).holds);
}

TEST(CheckExpression, AMissingMeasurementMakesTheCheckNotEvaluable) {
  FakeRun run;
  run.Set("pitfall.phase_peak.eval", 12 * kMiB);
  CheckOutcome outcome =
      EvaluateCheck(Parse("pitfall.phase_peak.eval >= 3 * fixed.phase_peak.eval", true), "", run.Lookup());
  EXPECT_FALSE(outcome.evaluable);
  EXPECT_EQ(outcome.explanation,
            "pitfall.phase_peak.eval >= 3 * fixed.phase_peak.eval: cannot evaluate: no measurement of "
            "fixed.phase_peak.eval");
  CheckOutcome both = EvaluateCheck(Parse("peak + peak <= transfers", false), "oom", run.Lookup());
  EXPECT_FALSE(both.evaluable);
  EXPECT_EQ(both.explanation, "peak + peak <= transfers: cannot evaluate: no measurement of oom.peak, oom.transfers");
  EXPECT_EQ(run.asked.size(), 4u);  // each measurement is asked for once per evaluation
  run.Set("a.grads", 1);
  run.SetDigest("b.grads", "ff");
  EXPECT_EQ(EvaluateCheck(Parse("a.grads == b.grads", true), "", run.Lookup()).explanation,
            "a.grads == b.grads: cannot evaluate: a.grads is a number, not a digest");
  EXPECT_FALSE(EvaluateCheck(CheckExpression(), "", run.Lookup()).evaluable);
}

TEST(CheckExpression, ListsTheVariantsARelationReferences) {
  EXPECT_EQ(
      ReferencedVariants(Parse("pitfall.live_after_last - fixed.live_after_last == pitfall.retained_grad_bytes", true)),
      (std::vector<std::string>{"pitfall", "fixed"}));
  EXPECT_TRUE(ReferencedVariants(Parse("peak <= 1GiB", false)).empty());
  EXPECT_TRUE(Parse("a.peak < b.peak", true).relation_mode());
}

constexpr const char* kMetrics =
    "(metrics: peak, alloc_count, allocated_bytes_total, phase_peak.<phase>, live_after[N], live_after_last, "
    "live_after_backward[N], iteration_peak[N], live_growth_per_iteration, transfers, transfer_bytes, "
    "transfers_per_step, transfer_bytes_per_step, "
    "retained_grad_bytes, forward_saved_bytes, param_bytes, grad_bytes, optimizer_state_bytes, "
    "clip_grad_norm_bytes, grads, diagnosis_bytes.<kind>, diagnosis_count.<kind>)";

TEST(CheckExpression, SyntaxErrorsNameTheColumn) {
  EXPECT_EQ(ParseError("peak x 12MiB", false), "at column 6: expected an operator (== != < <= > >=), got 'x'");
  EXPECT_EQ(ParseError("peak = 12MiB", false), "at column 6: expected an operator (== != < <= > >=), got '='");
  EXPECT_EQ(ParseError("peak <=", false), "at column 8: expected a number, a metric or '(', got end of expression");
  EXPECT_EQ(ParseError("", false), "at column 1: expected a number, a metric or '(', got end of expression");
  EXPECT_EQ(ParseError("peak <= 12 MiB", false),
            "at column 12: expected end of expression, got 'MiB' (write a size without a space: 12MiB)");
  EXPECT_EQ(ParseError("peak < 1 < 2", false), "at column 10: expected end of expression, got '<'");
  EXPECT_EQ(ParseError("(peak + 1 <= 2", false), "at column 11: expected ')' to close the '(' at column 1, got '<='");
  EXPECT_EQ(ParseError("peak <= -1", false), "at column 9: expected a number, a metric or '(', got '-'");
  EXPECT_EQ(ParseError("peak <= 12XB", false),
            "at column 9: invalid size '12XB': unknown unit 'XB'; expected a size such as 16GiB, 15.5GB, 512MiB, "
            "4096 or 1e9 (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  EXPECT_EQ(ParseError("peak <= 0.5B", false), "at column 9: invalid size '0.5B': not a whole number of bytes");
  EXPECT_EQ(ParseError("peak <= 1.2.3", false), "at column 12: expected end of expression, got '.3'");
  EXPECT_EQ(ParseError("phase_peak. == 1", false),
            "at column 13: expected a metric name after 'phase_peak.', got '=='");
}

// A newline, an escape or a byte of a UTF-8 character is quoted as \xNN: the message goes to a terminal.
TEST(CheckExpression, ControlAndNonAsciiBytesAreShownAsCodes) {
  EXPECT_EQ(ParseError("peak\n>= 1", false), "at column 5: expected an operator (== != < <= > >=), got '\\x0A'");
  EXPECT_EQ(ParseError("peak >= \x1b[2J", false), "at column 9: expected a number, a metric or '(', got '\\x1B'");
  EXPECT_EQ(ParseError("peak \xc3\xa9 1", false),
            "at column 6: expected an operator (== != < <= > >=), got '\\xC3\\xA9'");
  EXPECT_EQ(ParseError("peak \xff 1", false), "at column 6: expected an operator (== != < <= > >=), got '\\xFF'");
  EXPECT_EQ(ParseError("peak \u2264 12MiB", false),
            "at column 6: expected an operator (== != < <= > >=), got '\u2264' (write <=)");
  EXPECT_EQ(ParseError("peak <= 2 \u00d7 param_bytes", false),
            "at column 11: expected end of expression, got '\u00d7' (write *)");
}

TEST(CheckExpression, ASlashSaysThereIsNoDivision) {
  constexpr const char* kNoDivision =
      "there is no division in check expressions; multiply the other side instead (a >= 2 * b, not a / b >= 2)";
  EXPECT_EQ(ParseError("peak <= 1 / 2", false), std::string("at column 11: ") + kNoDivision);
  EXPECT_EQ(ParseError("phase_peak.eval / phase_peak.forward >= 2", false),
            std::string("at column 17: ") + kNoDivision);
  EXPECT_EQ(ParseError("(peak / 2) <= 1MiB", false), std::string("at column 7: ") + kNoDivision);
  EXPECT_EQ(ParseError("peak <= / 2", false), std::string("at column 9: ") + kNoDivision);
  EXPECT_EQ(ParseError("a.peak / b.peak >= 2", true), std::string("at column 8: ") + kNoDivision);
  EXPECT_EQ(ParseError("a / b.peak >= 2", true), std::string("at column 3: ") + kNoDivision);
  EXPECT_EQ(ParseError("live_after[2/1] > 0", false), std::string("at column 13: ") + kNoDivision);
}

TEST(CheckExpression, DiagnosisMetricsNameAKindWithUnderscores) {
  for (const char* text : {"diagnosis_bytes.retained_grad == 4", "diagnosis_count.graph_kept_across_iterations >= 1"}) {
    CheckExpression expression;
    std::string error;
    EXPECT_TRUE(ParseCheckExpression(text, /*relation_mode=*/false, &expression, &error)) << error;
  }
  EXPECT_EQ(ParseError("diagnosis_bytes.retained_grads == 4", false),
            "at column 1: unknown diagnosis kind 'retained_grads' in 'diagnosis_bytes.retained_grads'; did you mean "
            "'retained_grad'? (kinds, with _ for -: eval_keeps_graph, graph_kept_across_iterations, retained_grad, "
            "leak, transfer_in_recompute, inplace_on_saved, inplace_on_leaf, checkpoint_rng, activations_dominate)");
}

TEST(CheckExpression, UnknownMetricsAreRejectedWithASuggestion) {
  EXPECT_EQ(ParseError("peek <= 1GiB", false),
            std::string("at column 1: unknown metric 'peek'; did you mean 'peak'? ") + kMetrics);
  EXPECT_EQ(ParseError("1 < wibble", false), std::string("at column 5: unknown metric 'wibble' ") + kMetrics);
  EXPECT_EQ(ParseError("a.transfer < b.transfers", true),
            std::string("at column 3: unknown metric 'transfer'; did you mean 'transfers'? ") + kMetrics);
  EXPECT_EQ(ParseError("phase_peak.evl < 1", false),
            "at column 1: unknown phase 'evl' in 'phase_peak.evl'; did you mean 'eval'? (phases: setup, transfer, "
            "forward, backward, optimizer, zero_grad, eval, step)");
  EXPECT_EQ(ParseError("phase_peak < 1", false),
            "at column 1: phase_peak needs a phase: phase_peak.<phase> with phase one of setup, transfer, forward, "
            "backward, optimizer, zero_grad, eval, step");
  EXPECT_EQ(ParseError("live_after == 0", false),
            "at column 1: live_after needs an iteration: live_after[N] with N >= 1 (or live_after_last)");
  EXPECT_EQ(ParseError("live_after[0] == 0", false), "at column 12: live_after[0]: iterations count from 1");
  EXPECT_EQ(ParseError("live_after[x] == 0", false),
            "at column 12: expected an iteration number (an integer >= 1) after '[', got 'x'");
  EXPECT_EQ(ParseError("live_after[1 == 0", false), "at column 14: expected ']', got '=='");
  EXPECT_EQ(ParseError("live_after[12345678901] == 0", false),
            "at column 12: expected an iteration number (an integer >= 1) after '[', got '12345678901'");
  EXPECT_EQ(ParseError("peak[2] == 0", false),
            "at column 1: metric 'peak' takes no index (only live_after[N], live_after_backward[N] and "
            "iteration_peak[N] do)");
  EXPECT_EQ(ParseError("pitfall.peak <= 1", false),
            "at column 1: unknown metric 'pitfall.peak': per-variant checks name bare metrics of their own variant "
            "('peak'); comparisons between variants are relations (the top-level \"checks\")");
}

TEST(CheckExpression, RelationsNameAVariantInEveryRef) {
  EXPECT_EQ(ParseError("peak <= 12MiB", true),
            "at column 6: expected '.' and a metric after variant 'peak' (relations name VARIANT.METRIC, e.g. "
            "fixed.peak), got '<='");
  EXPECT_EQ(ParseError("a.peak <= b.", true), "at column 13: expected a metric name after 'b.', got end of expression");
  EXPECT_EQ(Parse("a.live_after[2] > 3 * b.phase_peak.backward", true).text(),
            "a.live_after[2] > 3 * b.phase_peak.backward");
}

TEST(CheckExpression, GradsDigestsOnlyCompareForEqualityWithGrads) {
  EXPECT_EQ(ParseError("a.grads < b.grads", true), "at column 9: grads can only be compared with == or !=, not <");
  EXPECT_EQ(ParseError("a.peak == b.grads", true),
            "at column 11: grads is a digest of the gradients: it can only be compared with another grads (e.g. "
            "preserved.grads == reference.grads)");
  EXPECT_EQ(ParseError("a.grads + 1 == b.grads", true),
            "at column 1: grads is a digest of the gradients: it cannot take part in arithmetic, only in == or != "
            "with another grads (e.g. preserved.grads == reference.grads)");
}

}  // namespace
}  // namespace oomguard
