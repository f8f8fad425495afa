#include "workload/unmirrored_op_watch.h"

#include <algorithm>

#include "model/meta_not_mirrored.h"

namespace oomguard {

UnmirroredOpWatch::UnmirroredOpWatch() : subscription_(this, {.op_starts = true}) {}

std::unique_ptr<at::ObserverContext> UnmirroredOpWatch::OnOpStart(const at::RecordFunction& fn) {
  const char* name = fn.name();
  for (const NotMirroredOp& op : NotMirroredOps()) {
    if (op.op == name) {
      std::lock_guard<std::mutex> lock(mutex_);
      seen_.insert(op.op);
    }
  }
  return nullptr;
}

std::vector<std::string> UnmirroredOpWatch::Warnings(const KernelTarget& target,
                                                     const std::vector<std::string>& given) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> warnings;
  for (const NotMirroredOp& op : NotMirroredOps()) {
    if (!seen_.contains(op.op)) continue;
    const bool said = std::any_of(given.begin(), given.end(),
                                  [&](const std::string& w) { return w.find(op.op + " (in ") != std::string::npos; });
    if (said || (!target.cuda() && op.differs.empty())) continue;
    warnings.push_back(target.cuda() ? op.op + " " + op.card_differs + ", " + NotMirroredOnACard()
                                     : op.op + " " + op.differs + ", " + NotMirroredConsequence());
  }
  return warnings;
}

}  // namespace oomguard
