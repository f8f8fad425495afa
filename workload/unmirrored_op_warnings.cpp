#include "workload/unmirrored_op_warnings.h"

#include <algorithm>

#include "model/meta_not_mirrored.h"

namespace oomguard {

std::vector<std::string> UnmirroredOpWarnings(const std::vector<std::string>& ran, const KernelTarget& target,
                                              const std::vector<std::string>& given) {
  std::vector<std::string> warnings;
  for (const NotMirroredOp& op : NotMirroredOps()) {
    if (std::find(ran.begin(), ran.end(), op.op) == ran.end()) continue;
    const bool said = std::any_of(given.begin(), given.end(),
                                  [&](const std::string& w) { return w.find(op.op + " (in ") != std::string::npos; });
    if (said) continue;
    warnings.push_back(target.cuda() ? op.op + " " + op.card_differs + ", " + NotMirroredOnACard()
                                     : op.op + " " + op.differs + ", " + NotMirroredConsequence());
  }
  return warnings;
}

}  // namespace oomguard
