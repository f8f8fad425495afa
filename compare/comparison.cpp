#include "compare/comparison.h"

#include <algorithm>
#include <cmath>

#include "base/byte_size.h"

namespace oomguard {
namespace {

const ComparedRun::Entry* Find(const ComparedRun& run, const std::string& scenario, const std::string& variant) {
  for (const ComparedRun::Entry& e : run.entries) {
    if (e.scenario == scenario && e.variant == variant) return &e;
  }
  return nullptr;
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

}  // namespace oomguard
