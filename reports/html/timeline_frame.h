// Where the timeline chart's data lands: the plot area and its two scales, computed from a scenario's
// measurements before anything is drawn. svg_timeline.h draws with this frame (and includes this
// header, so callers need only that one).
//
//   const TimelineFrame f = ComputeTimelineFrame(scenario, 960, 340);
//   const double x = f.X(point.event_index), y = f.Y(point.live_bytes);  // pixels
//
// Contract: pure arithmetic on the ScenarioResult; the same scenario and size give the same frame on
// every machine.
#pragma once

#include <cstdint>

#include "model/run_results.h"

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

namespace timeline_detail {
// What the frame and the drawing (svg_timeline.cpp) both read from the measurements, so that the
// scales and the marks agree; not an interface.

// The variant has a measurement with timeline points (only those are plotted).
bool HasTimeline(const VariantResult& variant);
// The ledger's peak, or a timeline point above it (the highest thing the chart shows for it).
int64_t PeakBytes(const VariantMeasurement& measurement);
// The scenario's cap, else the first measured variant's; 0 when there is none.
int64_t CapBytes(const ScenarioResult& scenario);
// The last event a variant's timeline or phase marks reach.
int64_t LastEvent(const LedgerStats& ledger);
// The first timeline point with the highest live bytes (the timeline must not be empty).
const TimelinePoint& HighestPoint(const LedgerStats& ledger);
// Where the OOM happened: the last point at or above the live bytes the OOM report names (the run
// unwinds and frees after it), else the highest point.
const TimelinePoint& OomPoint(const VariantMeasurement& measurement);
// A round step from 1, 2, 5 times a power of ten, at or above raw (between event ticks).
int64_t NiceCountStep(double raw);
}  // namespace timeline_detail

}  // namespace oomguard
