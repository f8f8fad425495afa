#include "backends/meta/kernel_target.h"

namespace oomguard {
namespace {
KernelTarget& Target() {
  static KernelTarget target;
  return target;
}
}  // namespace

std::string Describe(const KernelTarget& target) {
  if (!target.cuda()) return "cpu";
  return "cuda sm_" + std::to_string(target.compute_capability);
}

const KernelTarget& CurrentKernelTarget() { return Target(); }
void SetKernelTarget(const KernelTarget& target) { Target() = target; }

}  // namespace oomguard
