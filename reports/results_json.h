// The JSON results file (`oomguard run --json FILE`): every measured number, every verdict and its
// reasons, with a schema version. Baselines and the other reports read this.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/run_results.h"

namespace oomguard {

inline constexpr int kResultsSchemaVersion = 1;

nlohmann::json ResultsToJson(const RunResults& report);

// Writes ResultsToJson atomically (atomic_file.h).
[[nodiscard]] bool WriteResultsJson(const RunResults& report, const std::string& path, std::string* error);

}  // namespace oomguard
