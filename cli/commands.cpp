#include "cli/commands.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "base/byte_size.h"
#include "allocators/cards.h"
#include "backends/backend.h"
#include "baselines/baseline_update.h"
#include "base/did_you_mean.h"
#include "base/exit_codes.h"
#include "run/runner.h"
#include "scenario/catalog.h"
#include "scenario/scenario_loader.h"
#include "reports/console_writer.h"
#include "reports/report_format.h"
#include "reports/report_registry.h"
#include "reports/results_json.h"

namespace oomguard {
int CardsCommand(bool with_sources, std::ostream& out) {
  out << PadRight("card", 12) << PadRight("name", 32) << PadRight("reported", 12) << PadRight("context", 13) << "cap (usable)\n";
  for (const CardPreset& card : AllCards()) {
    out << PadRight(std::string(card.key), 12) << PadRight(std::string(card.display_name), 32)
        << PadRight(FormatBytes(card.total_bytes), 12) << PadRight(FormatBytes(card.context_bytes), 13)
        << FormatBytes(card.allocator_cap_bytes()) << "\n";
    if (with_sources) out << "    source: " << card.source << "\n";
  }
  out << "\nreported: the total CUDA reports (torch.cuda.get_device_properties().total_memory);\n"
         "cap: what oomguard lets tensors hold, the reported total minus the modelled CUDA context.\n";
  return kExitOk;
}

int RunCommand(const RunOptions& options, const std::string& self_exe, std::ostream& out, std::ostream& err) {
  RunResults report;
  std::string error;
  const ConsoleStyle style = &out == &std::cout ? StyleFor(STDOUT_FILENO) : ConsoleStyle{};
  for (const std::string& spec : options.reports) {
    if (!ValidateReportSpec(spec, &error)) {  // before the run, not after minutes of it
      err << "oomguard run: " << error << "\n";
      return kExitUsage;
    }
  }
  const bool ok = RunScenarios(
      options, self_exe, [&](const ScenarioResult& s) { WriteScenarioBlock(s, out, style), out.flush(); }, &report,
      &error);
  if (!ok) {
    err << "oomguard run: " << error << "\n";
    return kExitUsage;
  }
  WriteRunSummary(report, out, style);
  if (options.update_baselines) {
    if (!UpdateBaselines(report, options.baselines_dir, out, &error)) {
      err << "oomguard run: " << error << "\n";
      return kExitUsage;
    }
  }
  if (!options.json_path.empty()) {
    if (!WriteResultsJson(report, options.json_path, &error)) {
      err << "oomguard run: " << error << "\n";
      return kExitUsage;
    }
    out << "results: " << options.json_path << "\n";
  }
  for (const std::string& spec : options.reports) {
    if (!WriteReport(spec, report, &error)) {
      err << "oomguard run: " << error << "\n";
      return kExitUsage;
    }
    out << "report: " << spec.substr(spec.find('=') + 1) << "\n";
  }
  if (report.scenarios.empty()) {
    err << "oomguard run: no scenario matches --filter '" << options.filter << "'\n";
    return kExitUsage;
  }
  for (const ScenarioResult& s : report.scenarios) {
    if (IsFailure(s.code)) return kExitFailures;
  }
  return kExitOk;
}

int ListCommand(const RunOptions& options, std::ostream& out, std::ostream& err) {
  std::vector<std::string> files;
  std::string error;
  if (!FindScenarioFiles(PathsOrCatalog(options.paths), &files, &error)) {
    err << "oomguard list: " << error << "\n";
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
    out << PadRight(s.name, 28) << PadRight(backends, 16) << s.summary << "\n" << PadRight("", 28) << "variants: " << variants << "\n";
  }
  return broken ? kExitFailures : kExitOk;
}

int ExplainCommand(const RunOptions& options, const std::string& name, const std::string& self_exe,
                   std::ostream& out, std::ostream& err) {
  Scenario s;
  std::string error;
  if (!LoadScenarioByName(PathsOrCatalog(options.paths), name, &s, &error)) {
    err << "oomguard explain: " << error << "\n";
    return kExitUsage;
  }
  out << s.name << ": " << s.summary << "\n\n" << s.teach << "\n\nMeasured now (" << s.file << "):\n";
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
  RunResults report;
  const ConsoleStyle style{false, /*detailed=*/true};
  if (!RunScenarios(run, self_exe, [&](const ScenarioResult& r) { WriteScenarioBlock(r, out, style); }, &report,
                    &error)) {
    err << "oomguard explain: " << error << "\n";
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace oomguard
