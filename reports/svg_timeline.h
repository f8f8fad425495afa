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
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "harness/run_results.h"

namespace oomguard {

// Where the data lands in the picture; RenderTimelineSvg draws with exactly this mapping, and tests
// check it. x: events 0..max_event map to plot_left..plot_right; y: 0..y_max_bytes map to
// plot_bottom..plot_top (SVG y grows downwards).
struct TimelineFrame {
  double plot_left = 0, plot_top = 0, plot_right = 0, plot_bottom = 0;  // pixels
  int64_t max_event = 1;       // COUNT: the last event any variant's timeline or phase marks reach
  int64_t y_max_bytes = 1;     // the top gridline: a round size at or above the data (and the drawn cap)
  int64_t y_step_bytes = 1;    // between gridlines
  int64_t data_max_bytes = 0;  // the highest live bytes (or peak) of any plotted variant
  bool cap_drawn = false;      // the cap lies within the y range; otherwise it is only named in the legend

  double X(int64_t event_index) const;
  double Y(int64_t bytes) const;
};

// The frame RenderTimelineSvg(scenario, width, height) uses. The cap is drawn (and the y range
// stretched to it) when it is at most kCapNearFactor times the data's own round top; a cap far
// above would squash the data into a sliver.
inline constexpr double kCapNearFactor = 1.5;
TimelineFrame ComputeTimelineFrame(const ScenarioResult& scenario, int width, int height);

// The chart, or "" when no variant of the scenario has a measurement with timeline points.
std::string RenderTimelineSvg(const ScenarioResult& scenario, int width, int height);

// The colour of the variant at this index in ScenarioResult::variants (the HTML table's swatches match).
std::string_view VariantColour(size_t variant_index);

// Escapes & < > " ' for HTML/SVG text and attribute values (shared with html_writer.cpp).
std::string EscapeMarkup(std::string_view text);

}  // namespace oomguard
