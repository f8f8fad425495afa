#include "verdict/verdict.h"

#include <algorithm>

#include "base/byte_size.h"
#include "base/check.h"
#include "model/backend.h"
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
  const BackendTraits* traits = FindBackendTraits(backend);
  if (!outcome.evaluable && traits != nullptr && !traits->has_data && text.find("grads") != std::string::npos) {
    result.skipped = true;
    result.explanation = text + ": skipped on " + backend + " (gradients have no values there)";
  }
  return result;
}

// The first variant of `left_out` that a relation names (`named`); "" when none.
std::string LeftOutVariant(const std::vector<std::string>& named, const std::vector<std::string>& left_out) {
  for (const std::string& v : named) {
    if (std::find(left_out.begin(), left_out.end(), v) != left_out.end()) return v;
  }
  return "";
}

// The family of the kernels a measurement names: "cuda" for meta's "cuda sm_75" and a GPU's "cuda".
std::string KernelsFamily(const std::string& kernels) { return kernels.substr(0, kernels.find(' ')); }

// Note [Whose kernels a check is for] (model/scenario.h): the kernels of the first measured variant of
// `named` (every variant of a run is measured with the same), when they are not the ones `check` is
// for; "" when the check applies (or nothing it names was measured: it is not evaluable, and fails so).
std::string OtherKernels(const ScenarioCheck& check, const std::vector<std::string>& named,
                         const std::vector<VariantResult>& variants) {
  if (check.kernels.empty()) return "";
  for (const std::string& name : named) {
    for (const VariantResult& v : variants) {
      if (v.name != name || !v.measurement) continue;
      return KernelsFamily(v.measurement->kernels) == check.kernels ? "" : v.measurement->kernels;
    }
  }
  return "";
}

CheckResult SkippedForKernels(const ScenarioCheck& check, const std::string& measured) {
  CheckResult result;
  result.expression = check.expression;
  result.skipped = true;
  result.explanation =
      check.expression + ": skipped (for " + check.kernels + " kernels; measured with " + measured + " kernels)";
  return result;
}

std::string KindList(const std::vector<DiagnosisKind>& kinds) {
  std::string out = "[";
  for (size_t i = 0; i < kinds.size(); ++i) out += (i ? ", " : "") + std::string(Name(kinds[i]));
  return out + "]";
}

// The "diagnoses" expectation: exactly these kinds, in any order (Note [What each detector counts]).
// Advice (activations-dominate) is a trade, not a mistake: found and not named, it fails nothing, as
// for HasNoPitfalls(); named and not found, it fails like any kind.
void JudgeDiagnoses(const std::vector<DiagnosisKind>& expected, const VariantMeasurement& m,
                    std::vector<std::string>* reasons) {
  if (!m.diagnosed) {
    reasons->push_back("diagnoses " + KindList(expected) + " are expected, but the detectors did not watch this run");
    return;
  }
  std::vector<DiagnosisKind> found;
  for (const Diagnosis& d : m.diagnoses) found.push_back(d.kind);
  for (const Diagnosis& d : m.diagnoses) {
    if (!IsAdvice(d.kind) && std::find(expected.begin(), expected.end(), d.kind) == expected.end()) {
      reasons->push_back("unexpected diagnosis " + std::string(Name(d.kind)) + " (expected " + KindList(expected) +
                         "): " + d.message);
    }
  }
  for (DiagnosisKind kind : expected) {
    if (std::find(found.begin(), found.end(), kind) == found.end()) {
      reasons->push_back("expected diagnosis " + std::string(Name(kind)) + " was not found (found " + KindList(found) +
                         ")");
    }
  }
}

// Why a measured variant misses its expectation: its outcome, a leak, its checks, its diagnoses, one line each.
void JudgeMeasurement(const VariantExpectation& expectation, const VariantMeasurement& m, VariantResult* r) {
  if (m.outcome != expectation.outcome) {
    r->reasons.push_back("expected outcome " + Name(expectation.outcome) + ", got " + Name(m.outcome) +
                         (m.error.empty() ? "" : ": " + m.error));
  }
  if (m.outcome.kind == Outcome::kPass) {
    const std::optional<double> growth = LiveGrowthPerIteration(m);
    const int64_t grown = growth ? static_cast<int64_t>(*growth) : 0;
    if (!expectation.leak && growth && *growth > 0) {
      r->reasons.push_back("leak: live bytes grew by " + FormatBytes(grown) + " (" + std::to_string(grown) +
                           " bytes) per iteration");
    } else if (expectation.leak && !growth) {
      r->reasons.push_back("a leak is expected, but it takes at least 2 iterations to see one");
    } else if (expectation.leak_stated && !growth) {  // a stated "leak": false cannot pass unjudged
      r->reasons.push_back("\"leak\": false cannot be judged: growth takes at least 2 completed iterations, and the "
                           "run completed " + std::to_string(CompletedIterations(m)) +
                           (m.steady_state.empty() ? "" : " (" + m.steady_state + ")"));
    } else if (expectation.leak && *growth <= 0) {
      r->reasons.push_back("a leak is expected, but live bytes did not grow from iteration to iteration");
    }
  }
  if (m.injection && m.injected.empty()) {
    r->reasons.push_back("--inject " + m.injection->spec + " never fired: it saw " +
                         std::to_string(m.injection->requests_seen) +
                         " allocation requests and failed none (a fault that never fires tests nothing)");
  }
  if (expectation.diagnoses) JudgeDiagnoses(*expectation.diagnoses, m, &r->reasons);
  const MetricLookup lookup = [&m](const std::string&, const std::string& metric) { return LookupMetric(m, metric); };
  for (const ScenarioCheck& spec : expectation.checks) {
    const bool applies = spec.kernels.empty() || KernelsFamily(m.kernels) == spec.kernels;
    CheckResult check = applies ? Evaluate(spec.expression, /*relation_mode=*/false, r->name, lookup, m.backend)
                                : SkippedForKernels(spec, m.kernels);
    if (!check.holds && !check.skipped) r->reasons.push_back("check failed: " + check.explanation);
    r->checks.push_back(std::move(check));
  }
}

}  // namespace

VariantResult JudgeVariant(const VariantEvidence& e) {
  VariantResult r;
  r.name = e.name;
  r.expected_outcome = e.expectation.outcome;
  ResultCode code = ResultCode::kUnresolved;
  if (!e.measurement) {  // the child did not report: nothing to weigh but how it ended
    r.reasons.push_back(e.exit);
    r.diagnostics = e.diagnostics;
    r.input_error = e.input_error;
    code = e.timed_out ? ResultCode::kTimeout : ResultCode::kUnresolved;
  } else {
    r.expected_leak = e.expectation.leak;
    r.xfail_reason = e.expectation.xfail.value_or("");
    JudgeMeasurement(e.expectation, *e.measurement, &r);
    r.reasons.insert(r.reasons.end(), e.baseline_failures.begin(), e.baseline_failures.end());
    r.measurement = e.measurement;
    r.baseline = e.baseline;
    code = r.reasons.empty() ? ResultCode::kPass : ResultCode::kFail;
  }
  // Note [XFail applies last]: every reason to fail is in; the mark remaps the final code (it leaves
  // TIMEOUT and UNRESOLVED as they are).
  code = ApplyXFail(code, e.expectation.xfail.has_value());
  if (code == ResultCode::kXPass) r.reasons.push_back("marked xfail (" + r.xfail_reason + ") but passed");
  r.code = code;
  return r;
}

ScenarioResult JudgeScenario(const Scenario& scenario, ScenarioResult header, const ScenarioEvidence& evidence) {
  OOMGUARD_CHECK(header.variants.empty() && header.checks.empty() && header.error.empty())
      << "scenario '" << header.name << "' was judged already (or did not run): a result's code is decided once";
  ScenarioResult result = std::move(header);
  for (const VariantEvidence& e : evidence.variants) result.variants.push_back(JudgeVariant(e));
  const MetricLookup lookup = [&result](const std::string& variant, const std::string& metric) {
    for (const VariantResult& v : result.variants) {
      if (v.name == variant && v.measurement) return LookupMetric(*v.measurement, metric);
    }
    return std::optional<MetricValue>();
  };
  ResultCode code = ResultCode::kPass;
  for (const VariantResult& v : result.variants) code = Worse(code, v.code);
  for (const ScenarioCheck& spec : scenario.checks) {
    const std::string& text = spec.expression;
    CheckResult check;
    CheckExpression expression;
    std::string error;
    const std::vector<std::string> named = ParseCheckExpression(text, /*relation_mode=*/true, &expression, &error)
                                               ? ReferencedVariants(expression)
                                               : std::vector<std::string>();
    if (const std::string left_out = LeftOutVariant(named, scenario.left_out); !left_out.empty()) {
      check.expression = text;
      check.skipped = true;
      check.explanation = text + ": skipped (names " + left_out + ", which --filter left out)";
    } else if (const std::string other = OtherKernels(spec, named, result.variants); !other.empty()) {
      check = SkippedForKernels(spec, other);
    } else {
      check = Evaluate(text, /*relation_mode=*/true, "", lookup, result.backend);
    }
    if (!check.holds && !check.skipped) code = Worse(code, ResultCode::kFail);
    result.checks.push_back(std::move(check));
  }
  if (!evidence.baseline_error.empty()) {
    result.error = evidence.baseline_error;
    code = Worse(code, ResultCode::kUnresolved);
  }
  result.code = code;
  return result;
}

void RecordOutcome(VariantResult& variant, ResultCode code) { variant.code = code; }

void RecordScenarioOutcome(ScenarioResult& scenario) {
  ResultCode code = ResultCode::kPass;
  for (const VariantResult& v : scenario.variants) code = Worse(code, v.code);
  scenario.code = code;
}

}  // namespace oomguard
