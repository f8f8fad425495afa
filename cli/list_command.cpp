#include "base/did_you_mean.h"
#include "base/exit_codes.h"
#include "cli/command.h"
#include "cli/program_name.h"
#include "reports/report_format.h"
#include "scenario/catalog.h"
#include "scenario/scenario_loader.h"

namespace oomguard {
namespace {

int ListScenarios(const std::vector<std::string>& paths, std::ostream& out, std::ostream& err) {
  std::vector<std::string> files;
  std::string error;
  if (!FindScenarioFiles(PathsOrCatalog(paths), &files, &error)) {
    err << CommandPrefix("list") << error << "\n";
    return kExitUsage;
  }
  int broken = 0;
  for (const std::string& file : files) {
    Scenario s;
    if (!LoadScenarioFile(file, &s, &error)) {
      out << "(unloadable) " << error << "\n";
      ++broken;
      continue;
    }
    std::vector<std::string> names;
    for (const VariantSpec& v : s.variants) names.push_back(v.name);
    const std::string variants = JoinNames(names, ", ");
    const std::string backends = JoinNames(s.backends, ",");
    out << PadRight(s.name, 28) << PadRight(backends, 16) << s.summary << "\n"
        << PadRight("", 28) << "variants: " << variants << "\n";
  }
  return broken ? kExitFailures : kExitOk;
}

class ListCommand : public Command {
 public:
  CLI::App* Add(CLI::App& app) override {
    CLI::App* list = app.add_subcommand("list", "List the scenarios of the catalog (or of the given paths)");
    list->add_option("paths", paths_, "Scenario files or folders (default: the built-in catalog)");
    return list;
  }
  int Run(const std::string&, std::ostream& out, std::ostream& err) override { return ListScenarios(paths_, out, err); }

 private:
  std::vector<std::string> paths_;
};

}  // namespace

std::unique_ptr<Command> MakeListCommand() { return std::make_unique<ListCommand>(); }

}  // namespace oomguard
