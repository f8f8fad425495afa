// JSON for a variant's per-rank numbers (`measurement.ranks[]` in the results file; RankMeasurement,
// model/measurement.h). measurement_json.cpp writes and reads them with the rest of a measurement.
//
//   "ranks": [{"rank": 0, "outcome": "pass", "error": "", "ended": false, "measured": true,
//              "peak_bytes": 84017152, "peak_phase": "backward", "phase_peaks": [...],
//              "live_at_peak_by_origin": [...], "iterations": [...], "param_bytes": ...,
//              "grad_bytes": ..., "optimizer_state_bytes": ..., "communication_bytes": ...}, ...]
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "model/measurement.h"

namespace oomguard {

nlohmann::json RanksToJson(const std::vector<RankMeasurement>& ranks);

// Throws nlohmann::json::exception or std::invalid_argument (an unknown outcome) on a malformed array.
std::vector<RankMeasurement> RanksFromJson(const nlohmann::json& j);

}  // namespace oomguard
