// Watches a meta run for the ops meta runs with other bytes than the kernels it mirrors (cpu's, or a
// card's), whoever calls them: a registered C++ workload, a TorchScript module, the user's Python loop.
//
//   UnmirroredOpWatch watch;                 // on meta only: it subscribes to the op stream
//   ... the run ...
//   for (std::string& w : watch.Warnings(CurrentKernelTarget())) m.warnings.push_back(w);
//
// Note [Unmirrored ops are said at run time]: TorchScriptNet reads a module's graph for the ops of
// model/meta_not_mirrored.h and warns before the run, but a C++ workload's torch::nn::LSTM, or the Python
// package's nn.LSTM, calls aten::lstm with no graph to read, and meta ran its per-step path with other bytes
// than cpu's oneDNN LSTM without a word (a 2-layer LSTM(64, 128) over [8, 50, 64]: 6,275,080 bytes at the peak
// on meta, 11,156,032 on cpu). The watch sees each op as it starts (ops/op_stream.h) and says, once per op,
// what the kernels meta mirrors would have run: cpu's table (NotMirroredOps), or with a card's kernels what a
// card runs (cuDNN's RNN). A warning the module's load already gave for the op is not repeated.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backends/meta/kernel_target.h"
#include "ops/op_stream.h"

namespace oomguard {

class UnmirroredOpWatch : public OpObserver {
 public:
  UnmirroredOpWatch();
  std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) override;

  // One sentence per unmirrored op the run called, in the table's order; none for an op one of `given`
  // (the measurement's warnings so far) names already.
  std::vector<std::string> Warnings(const KernelTarget& target, const std::vector<std::string>& given) const;

 private:
  mutable std::mutex mutex_;
  std::set<std::string> seen_;
  OpSubscription subscription_;
};

}  // namespace oomguard
