// JSON for measurements: how a child process hands its VariantMeasurement to the runner, and the
// "measurement" objects of the results file. Kept apart from measurement.h so the types compile
// without the parser.
#pragma once

#include <nlohmann/json.hpp>

#include "model/measurement.h"

namespace oomguard {

nlohmann::json MeasurementToJson(const VariantMeasurement& m);

// Reads what MeasurementToJson wrote. Returns false and fills *error on a malformed document.
[[nodiscard]] bool MeasurementFromJson(const nlohmann::json& j, VariantMeasurement* m, std::string* error);

}  // namespace oomguard
