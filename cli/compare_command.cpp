#include "cli/compare_command.h"

#include <sstream>

#include "base/exit_codes.h"
#include "base/atomic_file.h"
#include "compare/comparison.h"
#include "compare/compared_run.h"
#include "reports/compare_report.h"

namespace oomguard {

int CompareCommand(const CompareOptions& options, std::ostream& out, std::ostream& err) {
  if (options.files.size() < 2) {
    err << "oomguard compare: give at least two results files (oomguard run --json FILE)\n";
    return kExitUsage;
  }
  std::vector<ComparedRun> runs(options.files.size());
  std::string error;
  for (size_t i = 0; i < options.files.size(); ++i) {
    if (!LoadComparedRun(options.files[i], &runs[i], &error)) {
      err << "oomguard compare: " << error << "\n";
      return kExitUsage;
    }
  }
  for (size_t i = 0; i < runs.size(); ++i) {  // two runs on one backend are told apart by file
    for (size_t k = 0; k < runs.size(); ++k) {
      if (k != i && runs[k].backend == runs[i].backend) runs[i].label = runs[i].backend + " (" + options.files[i] + ")";
    }
  }
  const int reference = ReferenceIndex(options.reference, runs);
  if (reference < 0) {
    err << "oomguard compare: --reference " << options.reference
        << " is neither the backend of a file nor a position from 1 to " << runs.size() << "\n";
    return kExitUsage;
  }
  const size_t reference_column = AddAllocatorColumns(&runs, static_cast<size_t>(reference));
  const ComparisonTable table = BuildComparisonTable(runs, reference_column, options.tolerance_percent);
  WriteComparisonTable(table, out);
  if (!options.markdown_path.empty()) {
    std::ostringstream md;
    WriteComparisonMarkdown(table, md);
    if (!WriteFileAtomically(options.markdown_path, md.str(), &error)) {
      err << "oomguard compare: " << error << "\n";
      return kExitUsage;
    }
  }
  return table.rows_past_tolerance == 0 ? kExitOk : kExitFailures;
}

}  // namespace oomguard
