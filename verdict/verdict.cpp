#include "verdict/verdict.h"

#include "base/byte_size.h"
#include "scenario/check_expression.h"
#include "verdict/metrics.h"

namespace oomguard {
namespace {

CheckResult Evaluate(const std::string& text, bool relation_mode, const std::string& variant,
                     const MetricLookup& lookup, const std::string& backend) {
  CheckResult result;
  result.expression = text;
  CheckExpression expression;
  std::string error;
  if (!ParseCheckExpression(text, relation_mode, &expression, &error)) {
    result.explanation = error;  // the loader parsed it already; kept for safety
    return result;
  }
  const CheckOutcome outcome = EvaluateCheck(expression, variant, lookup);
  result.evaluable = outcome.evaluable;
  result.holds = outcome.evaluable && outcome.holds;
  result.explanation = outcome.explanation;
  // Meta tensors have no data, so gradients cannot be compared there; the memory checks still apply.
  if (!outcome.evaluable && backend == "meta" && text.find("grads") != std::string::npos) {
    result.skipped = true;
    result.explanation = text + ": skipped on meta (gradients have no values there)";
  }
  return result;
}

}  // namespace

VariantResult JudgeVariant(const std::string& name, const VariantExpectation& expectation,
                           const VariantMeasurement& m) {
  VariantResult r;
  r.name = name;
  r.expected_outcome = expectation.outcome;
  r.expected_leak = expectation.leak;
  r.xfail_reason = expectation.xfail.value_or("");
  if (m.outcome != expectation.outcome) {
    r.reasons.push_back("expected outcome " + Name(expectation.outcome) + ", got " + Name(m.outcome) +
                        (m.error.empty() ? "" : ": " + m.error));
  }
  if (m.outcome.kind == Outcome::kPass) {
    const std::optional<double> growth = LiveGrowthPerIteration(m);
    const int64_t grown = growth ? static_cast<int64_t>(*growth) : 0;
    if (!expectation.leak && growth && *growth > 0) {
      r.reasons.push_back("leak: live bytes grew by " + FormatBytes(grown) + " (" + std::to_string(grown) +
                          " bytes) per iteration");
    } else if (expectation.leak && !growth) {
      r.reasons.push_back("a leak is expected, but it takes at least 2 iterations to see one");
    } else if (expectation.leak && *growth <= 0) {
      r.reasons.push_back("a leak is expected, but live bytes did not grow from iteration to iteration");
    }
  }
  const MetricLookup lookup = [&m](const std::string&, const std::string& metric) { return LookupMetric(m, metric); };
  for (const std::string& text : expectation.checks) {
    CheckResult check = Evaluate(text, /*relation_mode=*/false, name, lookup, m.backend);
    if (!check.holds && !check.skipped) r.reasons.push_back("check failed: " + check.explanation);
    r.checks.push_back(std::move(check));
  }
  r.code = ApplyXFail(r.reasons.empty() ? ResultCode::kPass : ResultCode::kFail, expectation.xfail.has_value());
  if (r.code == ResultCode::kXPass) r.reasons.push_back("marked xfail (" + r.xfail_reason + ") but passed");
  r.measurement = m;
  return r;
}

void JudgeScenario(const Scenario& scenario, ScenarioResult* result) {
  const MetricLookup lookup = [result](const std::string& variant, const std::string& metric) {
    for (const VariantResult& v : result->variants) {
      if (v.name == variant && v.measurement) return LookupMetric(*v.measurement, metric);
    }
    return std::optional<MetricValue>();
  };
  ResultCode code = ResultCode::kPass;
  for (const VariantResult& v : result->variants) code = Worse(code, v.code);
  for (const std::string& text : scenario.checks) {
    CheckResult check = Evaluate(text, /*relation_mode=*/true, "", lookup, result->backend);
    if (!check.holds && !check.skipped) code = Worse(code, ResultCode::kFail);
    result->checks.push_back(std::move(check));
  }
  result->code = code;
}

}  // namespace oomguard
