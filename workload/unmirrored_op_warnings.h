// The measurement's warnings for the ops a meta run called that meta runs with other bytes than the kernels
// it mirrors (model/meta_not_mirrored.h), noted by their Meta kernels as they ran (Note [Unmirrored ops are
// said as they run], backends/meta/kernel_target.h).
//
//   for (std::string& w : UnmirroredOpWarnings(TakeUnmirroredOps(), CurrentKernelTarget(), m.warnings)) ...
//
// TorchScriptNet reads a module's graph for these ops before the run; a C++ workload's torch::nn::LSTM or the
// Python loop's nn.LSTM has no graph to read, and meta ran its per-step path with other bytes than cpu's
// oneDNN LSTM without a word (a 2-layer LSTM(64, 128) over [8, 50, 64]: 6,275,080 bytes at the peak on meta,
// 11,156,032 on cpu). With a card's kernels the warning says what a card runs instead (cuDNN's RNN).
#pragma once

#include <string>
#include <vector>

#include "backends/meta/kernel_target.h"

namespace oomguard {

// One sentence per op of `ran`, in the table's order; none for an op a warning of `given` (the measurement's
// so far: a TorchScript module's load) names already.
std::vector<std::string> UnmirroredOpWarnings(const std::vector<std::string>& ran, const KernelTarget& target,
                                              const std::vector<std::string>& given);

}  // namespace oomguard
