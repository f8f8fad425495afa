#include "backends/meta/kernel_target.h"

#include <algorithm>
#include <mutex>

namespace oomguard {
namespace {
KernelTarget& Target() {
  static KernelTarget target;
  return target;
}
struct Warnings {
  std::mutex mutex;
  std::vector<std::string> list;
};
Warnings& KernelWarnings() {
  static Warnings warnings;
  return warnings;
}
}  // namespace

std::string Describe(const KernelTarget& target) {
  if (!target.cuda()) return "cpu";
  return "cuda sm_" + std::to_string(target.compute_capability);
}

const KernelTarget& CurrentKernelTarget() { return Target(); }
void SetKernelTarget(const KernelTarget& target) { Target() = target; }

void NoteKernelWarning(const std::string& warning) {
  Warnings& w = KernelWarnings();
  std::lock_guard<std::mutex> lock(w.mutex);
  if (std::find(w.list.begin(), w.list.end(), warning) == w.list.end()) w.list.push_back(warning);
}

std::vector<std::string> TakeKernelWarnings() {
  Warnings& w = KernelWarnings();
  std::lock_guard<std::mutex> lock(w.mutex);
  std::vector<std::string> taken;
  taken.swap(w.list);
  return taken;
}

}  // namespace oomguard
