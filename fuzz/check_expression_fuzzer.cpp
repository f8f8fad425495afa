// Fuzzes the check-expression parser (scenario/check_expression.h) in both modes, and the evaluator
// (verdict/check_evaluator.h) on what it accepts. Invariants: an error names its column; the canonical
// text parses again to itself; an outcome's explanation starts with that text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/check.h"
#include "fuzz/metric_lookup.h"
#include "scenario/check_expression.h"
#include "verdict/check_evaluator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oomguard;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const bool relation_mode : {false, true}) {
    CheckExpression check;
    std::string error;
    if (!ParseCheckExpression(text, relation_mode, &check, &error)) {
      OOMGUARD_CHECK(error.starts_with("at column ")) << error;
      continue;
    }
    CheckExpression again;
    std::string again_error;
    OOMGUARD_CHECK(ParseCheckExpression(check.text(), relation_mode, &again, &again_error))
        << "the canonical text '" << check.text() << "' does not parse: " << again_error;
    OOMGUARD_CHECK(again.text() == check.text()) << "'" << check.text() << "' parses to '" << again.text() << "'";
    OOMGUARD_CHECK(ReferencedVariants(again) == ReferencedVariants(check)) << check.text();

    const CheckOutcome outcome = EvaluateCheck(check, "base", fuzz::DummyMeasurements());
    OOMGUARD_CHECK(outcome.explanation.starts_with(check.text() + ": ")) << outcome.explanation;
  }
  return 0;
}
