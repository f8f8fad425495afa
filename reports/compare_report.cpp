#include "reports/compare_report.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "base/byte_size.h"
#include "reports/escape.h"
#include "reports/report_format.h"

namespace oomguard {
namespace {

// "27.23 MiB" in the reference column; "27.23 MiB (same)" or "27.24 MiB (+12.00 KiB, +0.1%)" elsewhere.
std::string CellText(const ComparisonCell& c, bool is_reference) {
  if (!c.peak_bytes) return "-";
  std::string text = FormatBytes(*c.peak_bytes);
  if (is_reference || !c.delta_bytes) return text;
  if (*c.delta_bytes == 0) return text + " (same)";
  return text + " (" + FormatSignedBytes(*c.delta_bytes) + ", " + FormatPercent(*c.delta_percent) + ")";
}

std::string HeldAtStartNote(const ComparisonTable& t) {
  if (t.cuda_held_at_start == 0) return "";
  return "cuda allocated and reserved are net of what the allocator held before each variant began (up to " +
         FormatBytes(t.cuda_held_at_start) + ": the CUDA libraries' workspaces).\n";
}

std::string Summary(const ComparisonTable& t) {
  char tolerance[32];
  std::snprintf(tolerance, sizeof tolerance, "%.1f%%", t.tolerance_percent);
  return std::to_string(t.rows.size()) + " variants against " + t.labels[t.reference] + ": " +
         std::to_string(t.rows_equal) + " equal to the byte, " + std::to_string(t.rows_within) + " within " +
         tolerance + ", " + std::to_string(t.rows_past_tolerance) + " past it (marked !)" +
         (t.rows_not_compared ? ", " + std::to_string(t.rows_not_compared) + " not compared (a peak is missing: -)"
                              : "");
}

void WriteExplanations(const ComparisonTable& t, std::ostream& out, const std::string& bullet) {
  bool any = false;
  for (const ComparisonRow& r : t.rows) {
    for (const std::string& why : r.explanations) {
      if (!any) out << "\nPast the tolerance, itemised:\n";
      any = true;
      out << bullet << r.scenario << " / " << r.variant << ": " << why << "\n";
    }
  }
}

}  // namespace

void WriteComparisonTable(const ComparisonTable& t, std::ostream& out) {
  std::vector<std::vector<std::string>> lines = {{"", "scenario", "variant"}};
  for (size_t i = 0; i < t.labels.size(); ++i) {
    lines[0].push_back(t.labels[i] + (i == t.reference ? " (reference)" : ""));
  }
  for (const ComparisonRow& r : t.rows) {
    std::vector<std::string> line = {r.past_tolerance ? "!" : "", r.scenario, r.variant};
    for (size_t i = 0; i < r.cells.size(); ++i) line.push_back(CellText(r.cells[i], i == t.reference));
    lines.push_back(std::move(line));
  }
  std::vector<size_t> widths(lines[0].size(), 0);
  for (const auto& line : lines) {
    for (size_t c = 0; c < line.size(); ++c) widths[c] = std::max(widths[c], line[c].size());
  }
  for (const auto& line : lines) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) text += c + 1 == line.size() ? line[c] : PadRight(line[c], widths[c] + 2);
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  }
  out << "\n" << Summary(t) << "\n" << HeldAtStartNote(t);
  WriteExplanations(t, out, "");
}

void WriteComparisonMarkdown(const ComparisonTable& t, std::ostream& out) {
  out << "| | scenario | variant |";
  for (size_t i = 0; i < t.labels.size(); ++i) {
    out << " " << MarkdownText(t.labels[i]) << (i == t.reference ? " (reference)" : "") << " |";
  }
  out << "\n|---|---|---|";
  for (size_t i = 0; i < t.labels.size(); ++i) out << "---|";
  out << "\n";
  for (const ComparisonRow& r : t.rows) {
    out << "| " << (r.past_tolerance ? "!" : "") << " | " << MarkdownText(r.scenario) << " | "
        << MarkdownText(r.variant) << " |";
    for (size_t i = 0; i < r.cells.size(); ++i) out << " " << CellText(r.cells[i], i == t.reference) << " |";
    out << "\n";
  }
  out << "\n" << Summary(t) << "\n" << HeldAtStartNote(t);
  WriteExplanations(t, out, "- ");
}

}  // namespace oomguard
