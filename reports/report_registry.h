// Report formats by name: `--report FORMAT=FILE` (repeatable), every writer fed by the same RunResults.
//
//   std::string error;
//   if (!ValidateReportSpec("junit=out.xml", &error)) { ... usage error ... }
//   if (!WriteReport("junit=out.xml", report, &error)) { ... }
//
// Formats: junit (JUnit XML), md (Markdown job summary), html (self-contained page with memory
// timelines), json (the results file). Files are written atomically.
#pragma once

#include <string>

#include "model/run_results.h"

namespace oomguard {

[[nodiscard]] bool ValidateReportSpec(const std::string& spec, std::string* error);
[[nodiscard]] bool WriteReport(const std::string& spec, const RunResults& report, std::string* error);

}  // namespace oomguard
