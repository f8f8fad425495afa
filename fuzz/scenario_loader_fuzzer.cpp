// Fuzzes the scenario loader (scenario/scenario_loader.h) and what a loaded scenario feeds.
// Invariants from its header: a failure is one message naming the file, never an internal error (an
// exception the loader caught), and one the results file can hold; a loaded scenario's checks parse
// and name its variants, its card and cap resolve. Then its checks are evaluated and each variant's
// memory estimate computed, as a run would.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "allocators/cards.h"
#include "base/byte_size.h"
#include "base/check.h"
#include "base/json_text.h"
#include "fuzz/metric_lookup.h"
#include "scenario/check_expression.h"
#include "scenario/scenario_loader.h"
#include "verdict/check_evaluator.h"
#include "verdict/memory_estimate.h"

namespace oomguard {
namespace {

CheckExpression ParsedCheck(const std::string& text, bool relation_mode, const Scenario& scenario) {
  CheckExpression check;
  std::string error;
  OOMGUARD_CHECK(ParseCheckExpression(text, relation_mode, &check, &error))
      << "loaded check '" << text << "': " << error;
  for (const std::string& variant : ReferencedVariants(check)) {
    OOMGUARD_CHECK(std::any_of(scenario.variants.begin(), scenario.variants.end(),
                               [&](const VariantSpec& v) { return v.name == variant; }))
        << "loaded check '" << text << "' names no variant of the scenario";
  }
  return check;
}

// A load error goes into the results file (reports/results_json.cpp), written by DumpJson: whatever
// bytes the message holds (an excerpt of a file that is not UTF-8), that must not throw.
bool WritableToResults(const std::string& message) {
  try {
    (void)DumpJson(nlohmann::json(message));
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// What the runner reports for a variant that ran: enough for the estimate's arithmetic.
VariantMeasurement DummyMeasurement(const VariantSpec& spec) {
  VariantMeasurement m;
  m.variant = spec.name;
  m.param_bytes = 1 << 20;
  m.grad_bytes = 1 << 20;
  m.optimizer_state_bytes = 2 << 20;
  m.forward_saved_bytes = 3 << 20;
  m.ledger.peak_bytes = 8 << 20;
  return m;
}

}  // namespace
}  // namespace oomguard

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oomguard;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Scenario scenario;
  std::string error;
  if (!LoadScenarioText(text, "fuzz.json", &scenario, &error)) {
    OOMGUARD_CHECK(error.starts_with("fuzz.json:")) << error;
    // As the loader writes one (a name in the file may quote the words anywhere else).
    OOMGUARD_CHECK(error.rfind("fuzz.json: internal error while loading: ", 0) != 0) << error;
    OOMGUARD_CHECK(WritableToResults(error)) << "the results writer cannot hold it: " << error;
    OOMGUARD_CHECK(scenario.name.empty() && scenario.variants.empty()) << "a failed load changed *out";
    return 0;
  }
  OOMGUARD_CHECK(!scenario.variants.empty());
  OOMGUARD_CHECK(scenario.card.empty() || scenario.cap.empty());
  if (!scenario.card.empty()) OOMGUARD_CHECK(FindCard(scenario.card, &error) != nullptr) << error;
  if (!scenario.cap.empty()) {
    int64_t cap = 0;
    OOMGUARD_CHECK(ParseByteSize(scenario.cap, &cap, &error) && cap > 0) << scenario.cap << ": " << error;
  }
  const MetricLookup lookup = fuzz::DummyMeasurements();
  for (const ScenarioCheck& check : scenario.checks)
    EvaluateCheck(ParsedCheck(check.expression, true, scenario), "", lookup);
  for (const auto& [variant, expectation] : scenario.expectations) {
    for (const ScenarioCheck& check : expectation.checks) {
      EvaluateCheck(ParsedCheck(check.expression, false, scenario), variant, lookup);
    }
  }
  for (const VariantSpec& spec : scenario.variants) EstimateMemory(scenario, spec, DummyMeasurement(spec));
  return 0;
}
