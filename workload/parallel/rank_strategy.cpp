#include "workload/parallel/rank_strategy.h"

#include "workload/parallel/data_parallel.h"
#include "workload/parallel/fully_sharded.h"

namespace oomguard {

std::unique_ptr<RankStrategy> MakeRankStrategy(const ParallelSpec& spec, std::vector<at::Tensor> parameters,
                                               const Net& net, const at::TensorOptions& device) {
  if (spec.strategy == "fsdp") return std::make_unique<FullySharded>(spec, std::move(parameters), net, device);
  return std::make_unique<DataParallel>(spec, std::move(parameters));
}

}  // namespace oomguard
