#include "reports/compare_report.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "allocators/byte_size.h"
#include "reports/report_format.h"

namespace oomguard {
namespace {

const ComparedRun::Entry* Find(const ComparedRun& run, const std::string& scenario, const std::string& variant) {
  for (const ComparedRun::Entry& e : run.entries) {
    if (e.scenario == scenario && e.variant == variant) return &e;
  }
  return nullptr;
}

// "27.23 MiB" in the reference column; "27.23 MiB (same)" or "27.24 MiB (+12.00 KiB, +0.1%)" elsewhere.
std::string CellText(const ComparisonCell& c, bool is_reference) {
  if (!c.peak_bytes) return "-";
  std::string text = FormatBytes(*c.peak_bytes);
  if (is_reference || !c.delta_bytes) return text;
  if (*c.delta_bytes == 0) return text + " (same)";
  return text + " (" + FormatSignedBytes(*c.delta_bytes) + ", " + FormatPercent(*c.delta_percent) + ")";
}

// Note [Itemised cuda differences]: allocated - other = (allocated - requested) + (requested - other).
// The first term is the caching allocator's: blocks rounded up to 512 bytes, and the tail of a segment
// left unsplit when it is too small to be worth a block. The second is the kernels': the cuda kernels
// asked for bytes the other backend's kernels did not (cuBLAS/cuDNN workspaces, attention kernels'
// scratch), or the reverse.
std::optional<std::string> ExplainAgainstCuda(const std::vector<ComparedRun>& runs, const ComparisonRow& row) {
  size_t cuda = runs.size();
  const ComparedRun::Entry* allocated = nullptr;
  for (size_t i = 0; i < runs.size() && allocated == nullptr; ++i) {
    const ComparedRun::Entry* e = runs[i].cuda_allocated ? Find(runs[i], row.scenario, row.variant) : nullptr;
    if (e && e->cuda_requested_peak && e->peak_bytes) {
      cuda = i;
      allocated = e;
    }
  }
  if (allocated == nullptr) return std::nullopt;
  std::string text;
  for (size_t i = 0; i < runs.size(); ++i) {
    const ComparisonCell& cell = row.cells[i];
    // The cuda run's own ledger column is its requested bytes: nothing left to itemise against it.
    if (i == cuda || !runs[i].judged || !cell.peak_bytes || runs[i].backend == runs[cuda].backend) continue;
    if (runs[i].predicts_cuda) continue;  // rounded already: what is left is the model's, not itemised here
    const int64_t rounding = *allocated->peak_bytes - *allocated->cuda_requested_peak;
    const int64_t kernels = *allocated->cuda_requested_peak - *cell.peak_bytes;
    text += (text.empty() ? "" : "; ") + runs[cuda].label + " - " + runs[i].label + " = " +
            FormatSignedBytes(rounding + kernels) + ": " + FormatSignedBytes(rounding) +
            " allocator rounding (512-byte blocks, unsplit segment tails), " + FormatSignedBytes(kernels) +
            " asked for by the kernels (cuBLAS/cuDNN workspaces, attention scratch)";
  }
  if (text.empty()) return std::nullopt;
  return text;
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

ComparisonTable BuildComparisonTable(const std::vector<ComparedRun>& runs, size_t reference, double tolerance_percent) {
  ComparisonTable t;
  t.reference = reference;
  t.tolerance_percent = tolerance_percent;
  for (const ComparedRun& run : runs) {
    t.labels.push_back(run.label);
    t.judged.push_back(run.judged);
  }
  for (const ComparedRun::Entry& first : runs.front().entries) {
    ComparisonRow row{first.scenario, first.variant, {}, false};
    const ComparedRun::Entry* ref = Find(runs[reference], first.scenario, first.variant);
    bool all_equal = true, all_compared = true;
    for (size_t i = 0; i < runs.size(); ++i) {
      ComparisonCell cell;
      if (const ComparedRun::Entry* e = Find(runs[i], first.scenario, first.variant)) cell.peak_bytes = e->peak_bytes;
      if (i != reference && !runs[i].judged) {
        // shown, not compared
      } else if (i != reference && cell.peak_bytes && ref && ref->peak_bytes) {
        cell.delta_bytes = *cell.peak_bytes - *ref->peak_bytes;
        cell.delta_percent = *ref->peak_bytes == 0 ? 0.0
                                                   : 100.0 * static_cast<double>(*cell.delta_bytes) /
                                                         static_cast<double>(*ref->peak_bytes);
        if (*cell.delta_bytes != 0) all_equal = false;
        if (std::fabs(*cell.delta_percent) > tolerance_percent) row.past_tolerance = true;
      } else if (i != reference) {
        all_compared = false;  // nothing to compare is never agreement
      }
      row.cells.push_back(cell);
    }
    for (const ComparedRun& run : runs) {
      if (const ComparedRun::Entry* e = Find(run, first.scenario, first.variant)) {
        t.cuda_held_at_start = std::max({t.cuda_held_at_start, e->cuda_allocated_at_start, e->cuda_reserved_at_start});
      }
    }
    if (row.past_tolerance) {
      if (std::optional<std::string> why = ExplainAgainstCuda(runs, row)) row.explanations.push_back(*why);
      ++t.rows_past_tolerance;
    } else if (!all_compared) {
      ++t.rows_not_compared;
    } else if (all_equal) {
      ++t.rows_equal;
    } else {
      ++t.rows_within;
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

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
