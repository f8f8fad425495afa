#include "backends/meta/meta_gradient_sums.h"

#include <torch/csrc/autograd/graph_task.h>

#include <utility>
#include <vector>

namespace oomguard {
namespace {

struct EngineLevels {
  int open_nodes = 0;  // node functions running on this thread, of any graph task
  // (graph task id, open_nodes when its first node started), innermost last.
  std::vector<std::pair<int, int>> tasks;
};
thread_local EngineLevels t_levels;

}  // namespace

EngineSumWatch::EngineSumWatch() : subscription_(this, {.backward_nodes = true, .backward_node_ends = true}) {}

void EngineSumWatch::OnBackwardNode(const at::RecordFunction&) {
  EngineLevels& levels = t_levels;
  const int task = torch::autograd::get_current_graph_task_id();
  // A graph task that ran inside a node which has returned since is over.
  while (!levels.tasks.empty() && levels.tasks.back().second > levels.open_nodes) levels.tasks.pop_back();
  if (levels.tasks.empty() || levels.tasks.back().first != task) levels.tasks.emplace_back(task, levels.open_nodes);
  ++levels.open_nodes;
}

void EngineSumWatch::OnBackwardNodeEnd(const at::RecordFunction&) {
  // A node that started before the watch did ends without a start.
  if (t_levels.open_nodes > 0) --t_levels.open_nodes;
}

bool EngineRunsBetweenNodes() {
  const EngineLevels& levels = t_levels;
  const int task = torch::autograd::get_current_graph_task_id();
  if (task < 0) return false;
  for (auto it = levels.tasks.rbegin(); it != levels.tasks.rend(); ++it) {
    if (it->first == task) return it->second == levels.open_nodes;
  }
  return false;
}

}  // namespace oomguard
