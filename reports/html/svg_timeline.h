// The memory timeline of one scenario as an inline SVG chart, for the HTML report (html_writer.h).
//
//   std::string svg = oomguard::RenderTimelineSvg(scenario, 960, 340);
//   if (!svg.empty()) html << svg;  // "<svg viewBox=... role=img>...</svg>"
//
// What the chart shows: live bytes over allocation/free events, one polyline per measured variant
// (each plotted by its own event_index, so variants with different event counts or timeline strides
// share the x axis honestly); labelled byte gridlines (FormatBytes); light phase bands, labelled
// above the plot where they are wide enough, with a key of their colours below it; the cap as a
// dashed line when it lies near the data (otherwise the legend says how far above it is); each
// variant's peak as a dot with its size; an OOM as a cross where live bytes last reached the OOM
// report's live bytes (the run frees memory as it unwinds afterwards).
//
// Phase bands come from the variant that ran longest (the first of equals). A variant whose phase
// marks are not a prefix of those (its phases began at other events) gets ticks of its own colour
// along the bottom of the plot; one that merely stopped early, at an OOM, needs none.
//
// Numbers are formatted with snprintf("%.1f"): the process must keep the "C" numeric locale.
//
// Contract: pure string building. No JavaScript, no URLs (inline SVG in HTML5 needs no xmlns), every
// text escaped, and every coordinate printed with one fixed decimal, so the same ScenarioResult gives
// the same bytes on every machine. Rendering never fails: it returns "" when no variant has timeline
// points (nothing to draw); the caller says so in words.
//
// The scales (TimelineFrame, ComputeTimelineFrame) are computed apart from the drawing, in
// timeline_frame.h, which this header includes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "model/run_results.h"
#include "reports/html/timeline_frame.h"

namespace oomguard {

// The chart, or "" when no variant of the scenario has a measurement with timeline points.
std::string RenderTimelineSvg(const ScenarioResult& scenario, int width, int height);

// The colour of the variant at this index in ScenarioResult::variants (the HTML table's swatches match).
std::string_view VariantColour(size_t variant_index);

}  // namespace oomguard
