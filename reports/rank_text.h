// A variant's ranks in words, for every report format (measurement.parallel, and the real ranks of
// measurement.ranks[], Note [Real ranks on cpu], workload/parallel/rank_group.h): computed once here,
// each writer escapes and places it.
//
//   RankPeaksText(m)   // "rank 0 88.08 MiB in optimizer (oom), rank 1 ended by the runner; highest: rank 0"
//   ParallelText(*m.parallel)  // "rank 0 of 8 (fsdp, param_dtype bfloat16, reduce_dtype float32)"
#pragma once

#include <string>

#include "model/measurement.h"

namespace oomguard {

// The measured rank with the highest peak (the lowest such rank on a tie); null when none was measured.
const RankMeasurement* HighestRank(const VariantMeasurement& m);

// Each rank's peak and the phase that held it (or how it ended), then the highest; "all 8 at 88.08 MiB
// in optimizer" when every rank passed with the same peak in the same phase; "" without ranks.
std::string RankPeaksText(const VariantMeasurement& m);

// One rank's line: "rank 1 of 4: pass, peak 88.08 MiB in optimizer; parameters 16.02 MiB, gradients
// 16.02 MiB, optimizer state 32.03 MiB, communication buffers 16.02 MiB", or its error.
std::string RankLine(const RankMeasurement& r, size_t world);

// The strategy and the precision the rank ran at, where it is not the model's dtype alone: "fsdp",
// "fsdp, param_dtype bfloat16, reduce_dtype float32", "zero2, float32 master weights".
std::string StrategyText(const ParallelMeasurement& p);
// Which rank of which world, and StrategyText: "rank 1 of 4 (zero2, float32 master weights)".
std::string ParallelText(const ParallelMeasurement& p);

}  // namespace oomguard
