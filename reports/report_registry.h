// Report formats by name: `--report FORMAT=FILE` (repeatable), every writer fed by the same RunResults.
//
//   std::string error;
//   if (!ValidateReportSpec("junit=out.xml", &error)) { ... usage error ... }
//   if (!WriteReport("junit=out.xml", report, &error)) { ... }
//
// Formats: junit (JUnit XML), md (Markdown job summary), html (self-contained page with memory
// timelines), json (the results file), csv (one row per variant). Files are written atomically.
// Adding a format: its writer (`std::string RenderX(const RunResults&)`) in a file of its own, and one
// row in kFormats (report_registry.cpp); the CLI's help and the error message list the rows.
#pragma once

#include <string>
#include <vector>

#include "model/run_results.h"

namespace oomguard {

// "junit", "md", "html", "json": the formats --report takes, in the registry's order.
std::vector<std::string> ReportFormatNames();

[[nodiscard]] bool ValidateReportSpec(const std::string& spec, std::string* error);
[[nodiscard]] bool WriteReport(const std::string& spec, const RunResults& report, std::string* error);

}  // namespace oomguard
