// The comparison `oomguard compare` computes, as data: one row per variant, one cell per results
// file, each peak set against the reference file's; the writers in reports/compare_report.h render it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compare/compared_run.h"

namespace oomguard {

struct ComparisonCell {
  std::optional<int64_t> peak_bytes;
  std::optional<int64_t> delta_bytes;   // against the reference; absent in its own column or without data
  std::optional<double> delta_percent;  // 100 * delta / reference peak
};

struct ComparisonRow {
  std::string scenario, variant;
  std::vector<ComparisonCell> cells;  // one per run, in file order
  bool past_tolerance = false;
  // Past the tolerance with a cuda allocated column: one line per other run, the difference itemised.
  std::vector<std::string> explanations = {};
};

struct ComparisonTable {
  std::vector<std::string> labels;  // one per run
  std::vector<bool> judged;         // one per run: held to the tolerance
  size_t reference = 0;
  double tolerance_percent = 0;
  std::vector<ComparisonRow> rows;
  int rows_equal = 0;   // every peak equal to the reference's, to the byte
  int rows_within = 0;  // different, but within the tolerance
  int rows_past_tolerance = 0;
  int rows_not_compared = 0;       // a peak missing on one side (and none past the tolerance)
  int64_t cuda_held_at_start = 0;  // the most a cuda run's allocator held before a variant began
};

ComparisonTable BuildComparisonTable(const std::vector<ComparedRun>& runs, size_t reference, double tolerance_percent);
}  // namespace oomguard
