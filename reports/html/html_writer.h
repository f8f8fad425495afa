// The HTML report (`oomguard run --report html=FILE`): one self-contained page for a whole run.
//
//   std::string page = oomguard::RenderHtml(report);
//   std::string error;
//   if (!WriteFileAtomically(path, page, &error)) { ... }  // atomic_file.h; the caller writes it
//
// The page: a header with the overall verdict (FAIL when any scenario's result is a failure,
// IsFailure) and the totals by result code, an index of scenarios, then one section per scenario
// with its result, summary, backend/card/cap, the memory timeline (svg_timeline.h), a table of
// variants (result, outcome, peak, peak phase, baseline comparison, reasons), the checks (ok /
// FAILED / skip with their explanations) and, for each variant that ran out of memory, what was
// live by category and by layer.
//
// Contract: a cumulative writer; it renders once, from finished result data, and never fails.
// Self-contained and static: inline CSS, no JavaScript, no URLs, no fonts or images to fetch.
// Every text from the report is HTML-escaped. Deterministic: no clock, host or path enters the page
// beyond what the RunResults holds, so a fixed RunResults gives the same bytes (the golden test,
// tests/html_report_test.cpp, relies on it).
#pragma once

#include <string>

#include "model/run_results.h"

namespace oomguard {

// The chart size RenderHtml asks RenderTimelineSvg for (pixels; the SVG scales down with the page).
inline constexpr int kHtmlChartWidth = 1000;
inline constexpr int kHtmlChartHeight = 330;

std::string RenderHtml(const RunResults& report);

}  // namespace oomguard
