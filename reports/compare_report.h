// The table `oomguard compare` prints: one row per variant, one column per results file, each peak
// set against the reference file's (compare/comparison.h computes it).
#pragma once

#include <ostream>

#include "compare/comparison.h"

namespace oomguard {

void WriteComparisonTable(const ComparisonTable& table, std::ostream& out);
void WriteComparisonMarkdown(const ComparisonTable& table, std::ostream& out);

}  // namespace oomguard
