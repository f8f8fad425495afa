#include <algorithm>

#include "backends/backend.h"
#include "base/exit_codes.h"
#include "cli/command.h"
#include "cli/program_name.h"
#include "cli/run_flags.h"
#include "reports/console_writer.h"
#include "run/runner.h"
#include "scenario/catalog.h"
#include "scenario/scenario_loader.h"

namespace oomguard {
namespace {

int Explain(const RunOptions& options, const std::string& name, const std::string& self_exe, std::ostream& out,
            std::ostream& err) {
  Scenario s;
  std::string error;
  if (!LoadScenarioArgument(NameSearchPaths(options.paths), name, &s, &error)) {
    err << CommandPrefix("explain") << error << "\n";
    return kExitUsage;
  }
  // A user's own scenario often has no teach text: then the summary, and straight to the numbers.
  out << s.name << ": " << s.summary << "\n\n"
      << s.teach << (s.teach.empty() ? "" : "\n\n") << "Measured now (" << s.file << "):\n";
  RunOptions run = options;
  run.paths = {s.file};
  // Without --backend (or with auto), measure where the scenario runs (the large models run on meta only).
  const auto& backends = s.backends;
  run.backend = Name(ResolveBackend(options.backend));
  if ((!options.backend_given || options.backend == "auto") && !backends.empty() &&
      std::find(backends.begin(), backends.end(), run.backend) == backends.end()) {
    run.backend = backends.front();
  }
  // Teaching: what the GPU's allocator would make of the same tensors (README, "Predicting the GPU's
  // allocator"); on cuda the allocator's own numbers are measured anyway.
  run.model_cuda = true;
  // And what each pitfall found costs: every fix that is a knob of the model source, measured.
  run.diagnose = true;
  RunResults report;
  const ConsoleStyle style{false, /*detailed=*/true};
  if (!RunScenarios(
          run, self_exe, [&](const ScenarioResult& r) { WriteScenarioBlock(r, out, style); }, &report, &error)) {
    err << CommandPrefix("explain") << error << "\n";
    return kExitUsage;
  }
  // It teaches with numbers: a scenario that could not be measured is not a lesson given.
  if (HasInputError(report)) return kExitUsage;
  for (const ScenarioResult& r : report.scenarios) {
    if (r.code == ResultCode::kUnresolved || r.code == ResultCode::kTimeout) return kExitFailures;
  }
  return kExitOk;
}

class ExplainCommand : public Command {
 public:
  CLI::App* Add(CLI::App& app) override {
    explain_ = app.add_subcommand("explain", "Teach a pitfall: what goes wrong, why, the fix, measured now");
    explain_->add_option("name", name_, "A scenario name (see `oomguard list`) or a .json file")->required();
    explain_->add_option("--paths", o_.paths, "Where to look (default: the built-in catalog)");
    AddRunFlags(explain_, &o_);
    return explain_;
  }
  int Run(const std::string& self_exe, std::ostream& out, std::ostream& err) override {
    o_.backend_given = explain_->get_option("--backend")->count() > 0;
    return Explain(o_, name_, self_exe, out, err);
  }

 private:
  CLI::App* explain_ = nullptr;
  RunOptions o_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Command> MakeExplainCommand() { return std::make_unique<ExplainCommand>(); }

}  // namespace oomguard
