// The results of `oomguard run`, as data: what the runner produces and every report renders.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/measurement.h"
#include "harness/result_code.h"

namespace oomguard {

struct CheckResult {
  std::string expression;
  bool evaluable = false;
  bool holds = false;
  bool skipped = false;  // needs data the backend does not have (grads on meta): neither holds nor fails
  std::string explanation;
};

struct VariantResult {
  std::string name;
  ResultCode code = ResultCode::kUnresolved;
  std::string expected_outcome = "pass";
  bool expected_leak = false;
  std::string xfail_reason;                       // non-empty when marked xfail
  std::vector<std::string> reasons;               // why it is not PASS, one line each
  std::vector<CheckResult> checks;                // the variant's own check expressions
  std::optional<VariantMeasurement> measurement;  // absent when the child crashed or timed out
  std::string diagnostics;                        // the end of the child's stderr when it did not report
};

struct ScenarioResult {
  std::string name;
  std::string file;
  std::string summary;
  std::string backend;
  std::string card;  // simulated card's name, empty for a plain cap
  int64_t cap_bytes = 0;
  ResultCode code = ResultCode::kUnresolved;
  std::string error;  // UNRESOLVED/UNSUPPORTED: why
  std::vector<VariantResult> variants;
  std::vector<CheckResult> checks;  // relations between variants
  double duration_ms = 0;
};

struct RunReport {
  std::vector<ScenarioResult> scenarios;  // in catalog order
  std::string backend;
  int jobs = 1;
  int64_t iterations = 0;  // 0: each scenario's own
  double duration_ms = 0;
};

}  // namespace oomguard
