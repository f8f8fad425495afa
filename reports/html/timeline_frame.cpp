// The timeline chart's scales: round byte gridlines, the event range, and whether the cap fits.
#include "reports/html/timeline_frame.h"

#include <algorithm>
#include <vector>

namespace oomguard {
namespace timeline_detail {

bool HasTimeline(const VariantResult& variant) {
  return variant.measurement && !variant.measurement->ledger.timeline.empty();
}

int64_t PeakBytes(const VariantMeasurement& measurement) {
  int64_t peak = measurement.ledger.peak_bytes;
  for (const TimelinePoint& p : measurement.ledger.timeline) peak = std::max(peak, p.live_bytes);
  return peak;
}

int64_t CapBytes(const ScenarioResult& scenario) {
  if (scenario.cap_bytes > 0) return scenario.cap_bytes;
  for (const VariantResult& v : scenario.variants) {
    if (v.measurement && v.measurement->cap_bytes > 0) return v.measurement->cap_bytes;
  }
  return 0;
}

int64_t LastEvent(const LedgerStats& ledger) {
  int64_t last = ledger.timeline.empty() ? 0 : ledger.timeline.back().event_index;
  if (!ledger.phase_marks.empty()) last = std::max(last, ledger.phase_marks.back().event_index);
  return last;
}

const TimelinePoint& HighestPoint(const LedgerStats& ledger) {
  return *std::max_element(ledger.timeline.begin(), ledger.timeline.end(),
                           [](const TimelinePoint& a, const TimelinePoint& b) { return a.live_bytes < b.live_bytes; });
}

const TimelinePoint& OomPoint(const VariantMeasurement& measurement) {
  const std::vector<TimelinePoint>& timeline = measurement.ledger.timeline;
  for (auto it = timeline.rbegin(); measurement.oom && it != timeline.rend(); ++it) {
    if (it->live_bytes >= measurement.oom->live_bytes) return *it;
  }
  return HighestPoint(measurement.ledger);
}

int64_t NiceCountStep(double raw) {
  int64_t power = 1;
  while (power * 10 <= raw) power *= 10;
  for (int64_t m : {1, 2, 5, 10}) {
    if (static_cast<double>(m * power) >= raw) return m * power;
  }
  return 10 * power;
}

}  // namespace timeline_detail

namespace {

using timeline_detail::CapBytes;
using timeline_detail::HasTimeline;
using timeline_detail::LastEvent;
using timeline_detail::PeakBytes;

constexpr double kLegendWidth = 210;  // right of the plot, drawn by svg_timeline.cpp

// A round step from the series 1, 2, 5, 10, 20, 50, ... times 1 byte, KiB, MiB, GiB or TiB, at or above raw.
int64_t NiceByteStep(double raw) {
  double unit = 1;
  while (unit * 1024 <= raw && unit < 1099511627776.0) unit *= 1024;
  for (double m : {1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1024.0}) {
    if (m * unit >= raw) return static_cast<int64_t>(m * unit);
  }
  return static_cast<int64_t>(1024 * unit);
}

}  // namespace

double TimelineFrame::X(int64_t event_index) const {
  return plot_left + (plot_right - plot_left) * static_cast<double>(event_index) / static_cast<double>(max_event);
}

double TimelineFrame::Y(int64_t bytes) const {
  return plot_bottom - (plot_bottom - plot_top) * static_cast<double>(bytes) / static_cast<double>(y_max_bytes);
}

TimelineFrame ComputeTimelineFrame(const ScenarioResult& scenario, int width, int height) {
  TimelineFrame f;
  f.plot_left = 84;
  f.plot_top = 30;
  f.plot_right = std::max(f.plot_left + 100, width - kLegendWidth - 16);
  f.plot_bottom = std::max(f.plot_top + 60, height - 60.0);
  for (const VariantResult& v : scenario.variants) {
    if (!HasTimeline(v)) continue;
    f.data_max_bytes = std::max(f.data_max_bytes, PeakBytes(*v.measurement));
    f.max_event = std::max(f.max_event, LastEvent(v.measurement->ledger));
  }
  auto fit = [&f](int64_t top) {
    top = std::max<int64_t>(top, 1);
    f.y_step_bytes = NiceByteStep(static_cast<double>(top) / 4.0);
    f.y_max_bytes = (top + f.y_step_bytes - 1) / f.y_step_bytes * f.y_step_bytes;
  };
  fit(f.data_max_bytes);
  const int64_t cap = CapBytes(scenario);
  if (cap > 0 && static_cast<double>(cap) <= kCapNearFactor * static_cast<double>(f.y_max_bytes)) {
    fit(std::max(f.data_max_bytes, cap));
    f.cap_drawn = true;
  }
  return f;
}

}  // namespace oomguard
