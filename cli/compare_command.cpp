#include "cli/compare_command.h"

#include <sstream>

#include "base/atomic_file.h"
#include "base/exit_codes.h"
#include "cli/command.h"
#include "cli/program_name.h"
#include "cli/run_flags.h"
#include "compare/compared_run.h"
#include "compare/comparison.h"
#include "reports/compare_report.h"

namespace oomguard {

int CompareCommand(const CompareOptions& options, std::ostream& out, std::ostream& err) {
  if (options.files.size() < 2) {
    err << CommandPrefix("compare") << "give at least two results files (oomguard run --json FILE)\n";
    return kExitUsage;
  }
  std::vector<ComparedRun> runs(options.files.size());
  std::string error;
  for (size_t i = 0; i < options.files.size(); ++i) {
    if (!LoadComparedRun(options.files[i], &runs[i], &error)) {
      err << CommandPrefix("compare") << error << "\n";
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
    err << CommandPrefix("compare") << "--reference " << options.reference
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
      err << CommandPrefix("compare") << error << "\n";
      return kExitUsage;
    }
  }
  return table.rows_past_tolerance == 0 ? kExitOk : kExitFailures;
}

namespace {

class CompareCli : public Command {
 public:
  CLI::App* Add(CLI::App& app) override {
    CLI::App* compare = app.add_subcommand("compare", "Set the peaks of several runs (backends) side by side");
    compare->add_option("results", o_.files, "Results files of `oomguard run --json FILE`, two or more")
        ->required()
        ->check(CLI::ExistingFile);
    compare->add_option("--reference", o_.reference,
                        "The run the others are measured against: a backend, or a position from 1 (default: the last)");
    compare
        ->add_option("--tolerance", o_.tolerance_percent,
                     "Percent a peak may differ from the reference's and still agree (default 2)")
        ->check(FiniteRange(0.0, 100.0));
    compare->add_option("--md", o_.markdown_path, "Also write the table as Markdown to this file");
    return compare;
  }
  int Run(const std::string&, std::ostream& out, std::ostream& err) override { return CompareCommand(o_, out, err); }

 private:
  CompareOptions o_;
};

}  // namespace

std::unique_ptr<Command> MakeCompareCommand() { return std::make_unique<CompareCli>(); }

}  // namespace oomguard
