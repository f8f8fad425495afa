// The timeline chart's drawing: phase bands, axes, one polyline per variant, peak and OOM marks, and
// the legend, all placed by the frame that timeline_frame.cpp computes.
#include "reports/html/svg_timeline.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "base/byte_size.h"
#include "model/phase.h"
#include "reports/escape.h"

namespace oomguard {
namespace {

using timeline_detail::CapBytes;
using timeline_detail::HasTimeline;
using timeline_detail::HighestPoint;
using timeline_detail::LastEvent;
using timeline_detail::NiceCountStep;
using timeline_detail::OomPoint;
using timeline_detail::PeakBytes;

constexpr double kCharWidth = 6.4;  // estimated width of one character at font-size 11
constexpr double kLineHeight = 13;  // between stacked labels
constexpr std::string_view kCapColour = "#b00020";

constexpr std::array<std::string_view, 8> kVariantColours = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                                             "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

std::string Num(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
}

double TextWidth(std::string_view text, double char_width = kCharWidth) {
  return char_width * static_cast<double>(text.size());
}

std::string Text(double x, double y, std::string_view attributes, std::string_view text) {
  return "<text x=\"" + Num(x) + "\" y=\"" + Num(y) + "\"" + std::string(attributes) + ">" + HtmlEscape(text) +
         "</text>\n";
}

std::string Line(double x1, double y1, double x2, double y2, std::string_view attributes) {
  return "<line x1=\"" + Num(x1) + "\" y1=\"" + Num(y1) + "\" x2=\"" + Num(x2) + "\" y2=\"" + Num(y2) + "\"" +
         std::string(attributes) + "/>\n";
}

std::string Rect(double x, double y, double width, double height, std::string_view attributes,
                 std::string_view title = "") {
  return "<rect x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" width=\"" + Num(width) + "\" height=\"" + Num(height) + "\"" +
         std::string(attributes) + (title.empty() ? "/>\n" : "><title>" + HtmlEscape(title) + "</title></rect>\n");
}

// The fixed colour of a phase the workload sets.
std::string_view PhaseColour(Phase phase) {
  switch (phase) {
    case Phase::kSetup:
      return "#eeeeee";
    case Phase::kZeroGrad:
      return "#f6e2f2";
    case Phase::kTransfer:
      return "#fff1c1";
    case Phase::kForward:
      return "#dceafa";
    case Phase::kBackward:
      return "#fde5d2";
    case Phase::kOptimizer:
      return "#dff2da";
    case Phase::kEval:
      return "#e8e0f7";
    case Phase::kStep:  // a workload's code outside the phases it marks
      return "#f4f4f4";
  }
  return "#eeeeee";
}

// Band colours by phase, in order of first appearance; the phases the workload sets have fixed colours.
std::vector<std::pair<std::string, std::string_view>> PhasePalette(const std::vector<PhaseMark>& marks) {
  static constexpr std::array<std::string_view, 4> kOthers = {"#d9f1ef", "#f3ecd2", "#fbe1e1", "#e6e6d8"};
  std::vector<std::pair<std::string, std::string_view>> palette;
  size_t others = 0;
  for (const PhaseMark& m : marks) {
    auto same = [&m](const auto& entry) { return entry.first == m.phase; };
    if (std::find_if(palette.begin(), palette.end(), same) != palette.end()) continue;
    Phase known;
    palette.emplace_back(m.phase, Parse(m.phase, &known) ? PhaseColour(known) : kOthers[others++ % kOthers.size()]);
  }
  return palette;
}

struct Label {
  double x, y;  // text anchor point (baseline)
  std::string text;
  bool anchor_end;
  std::string_view colour;
  double Left() const { return anchor_end ? x - TextWidth(text) : x; }
  double Right() const { return anchor_end ? x : x + TextWidth(text); }
};

// Moves labels down until none overlaps one placed before it (fixed ones first).
void Unclutter(std::vector<Label>& labels, size_t fixed) {
  for (size_t i = fixed; i < labels.size(); ++i) {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t j = 0; j < i; ++j) {
        bool overlap_x = labels[i].Left() < labels[j].Right() && labels[j].Left() < labels[i].Right();
        if (overlap_x && std::abs(labels[i].y - labels[j].y) < kLineHeight) {
          labels[i].y = labels[j].y + kLineHeight;
          moved = true;
        }
      }
    }
  }
}

std::string Truncate(const std::string& text, size_t max_chars) {
  if (text.size() <= max_chars || max_chars < 2) return text;
  return text.substr(0, max_chars - 1) + "\u2026";
}

// True when `marks` agree with `bands` for as far as they go (a run that ended early, an OOM).
bool PrefixOf(const std::vector<PhaseMark>& marks, const std::vector<PhaseMark>& bands) {
  return marks.size() <= bands.size() &&
         std::equal(marks.begin(), marks.end(), bands.begin(), [](const PhaseMark& a, const PhaseMark& b) {
           return a.event_index == b.event_index && a.phase == b.phase;
         });
}

}  // namespace

std::string_view VariantColour(size_t variant_index) { return kVariantColours[variant_index % kVariantColours.size()]; }

namespace {

// One chart being drawn: the frame, the variants with timelines, and the phase bands' source.
class Chart {
 public:
  Chart(const ScenarioResult& scenario, std::vector<size_t> plotted, int width, int height)
      : scenario_(scenario),
        plotted_(std::move(plotted)),
        f_(ComputeTimelineFrame(scenario, width, height)),
        cap_(CapBytes(scenario)),
        width_(width) {
    size_t source = plotted_.front();  // the variant that ran longest, the first of equals
    for (size_t index : plotted_) {
      if (LastEvent(Ledger(index)) > LastEvent(Ledger(source))) source = index;
    }
    bands_ = &Ledger(source).phase_marks;
    palette_ = PhasePalette(*bands_);
    for (size_t index : plotted_) own_ticks_.push_back(!PrefixOf(Ledger(index).phase_marks, *bands_));
  }

  std::string Render(int height) {
    double legend_bottom = f_.plot_top + 44;  // the cap's entry
    for (bool ticks : own_ticks_) legend_bottom += ticks ? 48 : 36;
    const int svg_height = static_cast<int>(std::ceil(std::max<double>(height, legend_bottom)));
    s_ = "<svg class=\"timeline\" width=\"" + std::to_string(width_) + "\" height=\"" + std::to_string(svg_height) +
         "\" viewBox=\"0 0 " + std::to_string(width_) + " " + std::to_string(svg_height) +
         "\" role=\"img\" font-family=\"system-ui, sans-serif\" font-size=\"11\">\n";
    s_ += "<title>Live memory of " + HtmlEscape(scenario_.name) + " over allocation events</title>\n";
    Phases();
    Axes();
    Series();
    Peaks();
    Legend();
    s_ += "</svg>\n";
    return std::move(s_);
  }

 private:
  const LedgerStats& Ledger(size_t index) const { return scenario_.variants[index].measurement->ledger; }

  std::string_view BandColour(const std::string& phase) const {
    for (const auto& [name, colour] : palette_) {
      if (name == phase) return colour;
    }
    return "#eeeeee";
  }

  // Bands behind the data, labelled above the plot where they are wide enough; a key of their
  // colours below the axis; ticks for variants whose phases do not follow the bands.
  void Phases() {
    const std::vector<PhaseMark>& marks = *bands_;
    s_ += "<g class=\"phases\">\n";
    double last_label_right = -1;
    for (size_t i = 0; i < marks.size(); ++i) {
      const int64_t end = i + 1 < marks.size() ? marks[i + 1].event_index : f_.max_event;
      if (end <= marks[i].event_index) continue;
      const double x0 = f_.X(marks[i].event_index), x1 = f_.X(end), centre = (x0 + x1) / 2;
      s_ += Rect(x0, f_.plot_top, x1 - x0, f_.plot_bottom - f_.plot_top,
                 " fill=\"" + std::string(BandColour(marks[i].phase)) + "\"", marks[i].phase);
      const double text_width = TextWidth(marks[i].phase, 5.8);
      if (x1 - x0 >= text_width + 4 && centre - text_width / 2 > last_label_right + 4) {
        s_ += Text(centre, f_.plot_top - 8, " text-anchor=\"middle\" font-size=\"10\" fill=\"#555\"", marks[i].phase);
        last_label_right = centre + text_width / 2;
      }
    }
    double x = f_.plot_left;
    const double y = f_.plot_bottom + 50;
    s_ += Text(x, y, " fill=\"#555\"", "phases:");
    x += TextWidth("phases:") + 8;
    for (const auto& [phase, colour] : palette_) {
      s_ += Rect(x, y - 9, 10, 10, " fill=\"" + std::string(colour) + "\" stroke=\"#999\" stroke-width=\"0.5\"");
      s_ += Text(x + 14, y, " fill=\"#555\"", phase);
      x += 14 + TextWidth(phase) + 12;
    }
    int row = 0;
    for (size_t k = 0; k < plotted_.size(); ++k) {
      if (!own_ticks_[k]) continue;
      const VariantResult& v = scenario_.variants[plotted_[k]];
      const double y1 = f_.plot_bottom - 7.0 * row++;
      for (const PhaseMark& m : v.measurement->ledger.phase_marks) {
        const std::string tx = Num(f_.X(m.event_index));
        s_ += "<line x1=\"" + tx + "\" y1=\"" + Num(y1) + "\" x2=\"" + tx + "\" y2=\"" + Num(y1 - 6) + "\" stroke=\"" +
              std::string(VariantColour(plotted_[k])) + "\" stroke-width=\"2\"><title>" + HtmlEscape(v.name) + ": " +
              HtmlEscape(m.phase) + "</title></line>\n";
      }
    }
    s_ += "</g>\n";
  }

  // Gridlines with byte labels, event ticks, and the cap line.
  void Axes() {
    s_ += "<g class=\"axes\">\n";
    for (int64_t v = 0; v <= f_.y_max_bytes; v += f_.y_step_bytes) {
      s_ += Line(f_.plot_left, f_.Y(v), f_.plot_right, f_.Y(v), v == 0 ? " stroke=\"#888\"" : " stroke=\"#ccc\"");
      s_ += Text(f_.plot_left - 6, f_.Y(v) + 4, " text-anchor=\"end\" fill=\"#333\"", FormatBytes(v));
    }
    const int64_t step = NiceCountStep(static_cast<double>(f_.max_event) / 6.0);
    for (int64_t e = 0; e <= f_.max_event; e += step) {
      s_ += Line(f_.X(e), f_.plot_bottom, f_.X(e), f_.plot_bottom + 4, " stroke=\"#888\"");
      s_ += Text(f_.X(e), f_.plot_bottom + 16, " text-anchor=\"middle\" fill=\"#333\"", std::to_string(e));
    }
    s_ += Text((f_.plot_left + f_.plot_right) / 2, f_.plot_bottom + 32, " text-anchor=\"middle\" fill=\"#333\"",
               "allocation/free events");
    if (f_.cap_drawn) {
      const double y = f_.Y(cap_);
      s_ += Line(
          f_.plot_left, y, f_.plot_right, y,
          " class=\"cap\" stroke=\"" + std::string(kCapColour) + "\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"");
      labels_.push_back(
          {f_.plot_left + 6, y - f_.plot_top >= 16 ? y - 5 : y + 13, "cap " + FormatBytes(cap_), false, kCapColour});
    }
    s_ += "</g>\n";
  }

  void Series() {
    s_ += "<g class=\"series\" fill=\"none\" stroke-width=\"2\" stroke-linejoin=\"round\">\n";
    for (size_t index : plotted_) {
      s_ += "<polyline stroke=\"" + std::string(VariantColour(index)) + "\" points=\"";
      const char* separator = "";
      for (const TimelinePoint& p : Ledger(index).timeline) {
        s_ += separator + Num(f_.X(p.event_index)) + "," + Num(f_.Y(p.live_bytes));
        separator = " ";
      }
      s_ += "\"><title>" + HtmlEscape(scenario_.variants[index].name) + "</title></polyline>\n";
    }
    s_ += "</g>\n";
  }

  // Each diagnosis with a known event: a triangle on the plot's top edge where the phase that allocated
  // its bytes began, the kind as its label and the message as its tooltip.
  void Diagnoses() {
    for (size_t index : plotted_) {
      const VariantMeasurement& m = *scenario_.variants[index].measurement;
      const std::string colour(VariantColour(index));
      for (const Diagnosis& d : m.diagnoses) {
        if (d.event_index < 0) continue;
        const double x = f_.X(d.event_index), y = f_.plot_top;
        s_ += "<path class=\"diagnosis\" d=\"M" + Num(x - 5) + " " + Num(y) + "L" + Num(x + 5) + " " + Num(y) + "L" +
              Num(x) + " " + Num(y + 8) + "Z\" fill=\"" + colour + "\"><title>" +
              HtmlEscape(std::string(Name(d.kind)) + ": " + d.message) + "</title></path>\n";
        labels_.push_back({x + 7, y + 9, std::string(Name(d.kind)), false, VariantColour(index)});
      }
    }
  }

  // Peak dots (and OOM crosses), their labels kept apart from each other and from the cap's.
  void Peaks() {
    const size_t fixed = labels_.size();
    s_ += "<g class=\"peaks\">\n";
    for (size_t index : plotted_) {
      const VariantMeasurement& m = *scenario_.variants[index].measurement;
      const std::string_view colour = VariantColour(index);
      const double x = f_.X(HighestPoint(m.ledger).event_index), y = f_.Y(PeakBytes(m));
      s_ += "<circle cx=\"" + Num(x) + "\" cy=\"" + Num(y) + "\" r=\"4\" fill=\"" + std::string(colour) +
            "\" stroke=\"#fff\" stroke-width=\"1\"/>\n";
      Label label{x + 7, y - 6, "peak " + FormatBytes(PeakBytes(m)), false, colour};
      if (label.Right() > f_.plot_right) label = {x - 7, y - 6, label.text, true, colour};
      if (label.y < f_.plot_top + 10) label.y = y + 15;
      labels_.push_back(label);
      if (m.outcome.kind == Outcome::kOom) {
        const TimelinePoint& at = OomPoint(m);
        const double ox = f_.X(at.event_index), oy = f_.Y(m.oom ? m.oom->live_bytes : at.live_bytes);
        s_ += "<path d=\"M" + Num(ox - 4) + " " + Num(oy - 4) + "L" + Num(ox + 4) + " " + Num(oy + 4) + "M" +
              Num(ox - 4) + " " + Num(oy + 4) + "L" + Num(ox + 4) + " " + Num(oy - 4) + "\" stroke=\"" +
              std::string(colour) + "\" stroke-width=\"2\"/>\n";
        labels_.push_back(
            {ox - 7, oy + 15, m.oom ? "OOM asking " + FormatBytes(m.oom->requested_bytes) : "OOM", true, colour});
      }
    }
    Diagnoses();
    Unclutter(labels_, fixed);
    for (const Label& l : labels_) {
      s_ += Text(l.x, l.y,
                 std::string(l.anchor_end ? " text-anchor=\"end\"" : "") + " fill=\"" + std::string(l.colour) +
                     "\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"",
                 l.text);
    }
    s_ += "</g>\n";
  }

  // Right of the plot: each variant's colour, name and peak, then the cap.
  void Legend() {
    const double x = f_.plot_right + 18;
    const size_t max_chars = static_cast<size_t>(std::max(4.0, (width_ - x - 28) / 7.0));
    double y = f_.plot_top + 4;
    s_ += "<g class=\"legend\">\n";
    for (size_t k = 0; k < plotted_.size(); ++k) {
      const VariantResult& v = scenario_.variants[plotted_[k]];
      s_ += Line(x, y - 4, x + 18, y - 4,
                 " stroke=\"" + std::string(VariantColour(plotted_[k])) + "\" stroke-width=\"3\"");
      s_ += "<text x=\"" + Num(x + 24) + "\" y=\"" + Num(y) + "\" font-size=\"12\" font-weight=\"bold\">" +
            HtmlEscape(Truncate(v.name, max_chars)) + "<title>" + HtmlEscape(v.name) + "</title></text>\n";
      std::string detail = "peak " + FormatBytes(PeakBytes(*v.measurement));
      if (!v.measurement->ledger.peak_phase.empty()) detail += " in " + v.measurement->ledger.peak_phase;
      s_ += Text(x + 24, y + 14, " fill=\"#555\"", detail);
      if (own_ticks_[k]) s_ += Text(x + 24, y + 27, " fill=\"#555\"", "phases: ticks at the bottom");
      y += own_ticks_[k] ? 48 : 36;
    }
    if (cap_ > 0) {
      const std::string colour(kCapColour);
      s_ += Line(x, y - 4, x + 18, y - 4, " stroke=\"" + colour + "\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"");
      s_ += Text(x + 24, y, " font-size=\"12\" fill=\"" + colour + "\"", "cap " + FormatBytes(cap_));
      if (!f_.cap_drawn) {
        char ratio[48];
        std::snprintf(ratio, sizeof ratio, "(%.0fx the chart's top)",
                      static_cast<double>(cap_) / static_cast<double>(f_.y_max_bytes));
        s_ += Text(x + 24, y + 14, " class=\"cap-off-scale\" fill=\"#555\"", "far above: not drawn");
        s_ += Text(x + 24, y + 27, " fill=\"#555\"", ratio);
      }
    }
    s_ += "</g>\n";
  }

  const ScenarioResult& scenario_;
  const std::vector<size_t> plotted_;  // indexes into scenario_.variants of those with timelines
  const TimelineFrame f_;
  const int64_t cap_;
  const int width_;
  const std::vector<PhaseMark>* bands_;
  std::vector<std::pair<std::string, std::string_view>> palette_;
  std::vector<bool> own_ticks_;  // per plotted_ entry: its phase marks are not a prefix of the bands'
  std::vector<Label> labels_;
  std::string s_;
};

}  // namespace

std::string RenderTimelineSvg(const ScenarioResult& scenario, int width, int height) {
  std::vector<size_t> plotted;
  for (size_t i = 0; i < scenario.variants.size(); ++i) {
    if (HasTimeline(scenario.variants[i])) plotted.push_back(i);
  }
  if (plotted.empty()) return "";
  return Chart(scenario, std::move(plotted), width, height).Render(height);
}

}  // namespace oomguard
