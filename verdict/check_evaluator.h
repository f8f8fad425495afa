// The evaluating half of check expressions (scenario/check_expression.h): values substituted, exact
// comparison, explanations.
//
//   CheckOutcome outcome = EvaluateCheck(check, "", lookup);
//   // outcome.explanation: "pitfall.phase_peak.eval >= 3 * fixed.phase_peak.eval: 12.00 MiB >= 3 * 2.00 MiB
//   // (6.00 MiB)"
//
// Error policy: evaluation never fails; a ref without a measurement makes the outcome not evaluable.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "scenario/check_expression.h"

namespace oomguard {

struct MetricValue {
  bool is_digest = false;
  double number = 0;   // bytes, or a count (see the metric list in check_expression.h)
  std::string digest;  // grads only
};

// Looks up `metric` (as written in canonical form: "peak", "phase_peak.eval", "live_after[2]") of `variant`;
// nullopt when that variant has no such measurement (e.g. it failed before it).
using MetricLookup = std::function<std::optional<MetricValue>(const std::string& variant, const std::string& metric)>;

struct CheckOutcome {
  bool evaluable = false;   // false when a ref had no measurement
  bool holds = false;       // meaningful only when evaluable
  std::string explanation;  // the expression with values substituted, or which measurements are missing
};

// Evaluates with values from `lookup`; bare refs (per-variant mode) are looked up in `default_variant`.
// Explanations show byte metrics with FormatBytes ("12.00 MiB") and exact byte counts when rounding would
// make two different values look equal; a compound side is followed by its value in parentheses:
//   "pitfall.phase_peak.eval >= 3 * fixed.phase_peak.eval: 12.00 MiB >= 3 * 2.00 MiB (6.00 MiB)"
//   "peak <= 12MiB: cannot evaluate: no measurement of pitfall.peak"
CheckOutcome EvaluateCheck(const CheckExpression& expression, const std::string& default_variant,
                           const MetricLookup& lookup);

}  // namespace oomguard
