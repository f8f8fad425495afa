#include <unistd.h>

#include <iostream>

#include "base/atomic_file.h"
#include "base/exit_codes.h"
#include "base/shard.h"
#include "baselines/baseline_update.h"
#include "cli/command.h"
#include "cli/program_name.h"
#include "cli/run_flags.h"
#include "reports/console_writer.h"
#include "reports/report_registry.h"
#include "reports/results_json.h"
#include "run/output_collisions.h"
#include "run/runner.h"

namespace oomguard {
namespace {

// Every output a run will write, with "{shard}" expanded: checked before the run, written after it.
struct Output {
  std::string spec;  // a --report's FORMAT=FILE; "" for --json
  std::string path;
};

std::vector<OutputFile> OutputFiles(const std::vector<Output>& outputs) {
  std::vector<OutputFile> files;
  for (const Output& output : outputs) {
    files.push_back({output.spec.empty() ? "--json " + output.path : "--report " + output.spec, output.path});
  }
  return files;
}

// The snapshots --snapshot-dir asked for that are not there (the console says why under each variant).
int SnapshotsNotWritten(const RunResults& report) {
  int lost = 0;
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) lost += v.measurement && !v.measurement->snapshot_error.empty();
  }
  return lost;
}

bool PlanOutputs(const RunOptions& options, std::vector<Output>* outputs, std::string* error) {
  Shard shard;
  if (!ResolveShard(options.shard, options.gtest_sharding, &shard, error)) return false;
  if (!options.json_path.empty()) {
    const std::string path = ShardPath(options.json_path, shard);
    if (!CheckWritablePath(path, error)) {
      *error = "--json " + *error;
      return false;
    }
    outputs->push_back({"", path});
  }
  for (const std::string& pattern : options.reports) {
    const std::string spec = ShardPath(pattern, shard);  // a format's name has no "{shard}"
    if (!ValidateReportSpec(spec, error)) return false;
    const std::string path = spec.substr(spec.find('=') + 1);
    if (!CheckWritablePath(path, error)) {
      *error = "--report " + spec.substr(0, spec.find('=') + 1) + *error;
      return false;
    }
    outputs->push_back({spec, path});
  }
  if (!options.snapshot_dir.empty() && !CheckWritableFolder(options.snapshot_dir, error)) {
    *error = "--snapshot-dir " + options.snapshot_dir + ": " + *error;
    return false;
  }
  if (options.update_baselines && !options.baselines_dir.empty() &&
      !CheckWritableFolder(options.baselines_dir, error)) {
    *error = "--baselines " + options.baselines_dir + ": " + *error;
    return false;
  }
  return CheckOutputsDistinct(OutputFiles(*outputs), error);
}

int RunAndReport(RunOptions options, const std::string& self_exe, std::ostream& out, std::ostream& err) {
  RunResults report;
  std::string error;
  const ConsoleStyle style = &out == &std::cout ? StyleFor(STDOUT_FILENO) : ConsoleStyle{};
  std::vector<Output> outputs;
  if (!PlanOutputs(options, &outputs, &error)) {  // before the run, not after minutes of it
    err << CommandPrefix("run") << error << "\n";
    return kExitUsage;
  }
  options.outputs = OutputFiles(outputs);  // the plan checks them against the run's inputs
  const bool ok = RunScenarios(
      options, self_exe, [&](const ScenarioResult& s) { WriteScenarioBlock(s, out, style), out.flush(); }, &report,
      &error);
  if (!ok) {
    err << CommandPrefix("run") << error << "\n";
    return kExitUsage;
  }
  WriteRunSummary(report, out, style);
  // Every output is attempted, whatever failed before it; a failure adds kExitOutputFailed to the code.
  bool outputs_ok = true;
  if (options.update_baselines && !UpdateBaselines(report, options.baselines_dir, out, &error)) {
    err << CommandPrefix("run") << error << "\n";
    outputs_ok = false;
  }
  if (const int lost = SnapshotsNotWritten(report); !options.snapshot_dir.empty() && lost > 0) {
    err << CommandPrefix("run") << "--snapshot-dir " << options.snapshot_dir << ": " << lost
        << " snapshot(s) could not be written (see above)\n";
    outputs_ok = false;
  }
  for (const Output& output : outputs) {
    const bool written =
        output.spec.empty() ? WriteResultsJson(report, output.path, &error) : WriteReport(output.spec, report, &error);
    if (!written) {
      err << CommandPrefix("run") << error << "\n";
      outputs_ok = false;
      continue;
    }
    out << (output.spec.empty() ? "results: " : "report: ") << output.path << "\n";
  }
  // Across every shard: a shard whose part --filter leaves empty passes, as an empty GoogleTest shard does.
  if (report.shard.selected_run_files == 0) {
    err << CommandPrefix("run")
        << (options.filter == "*"
                ? "no scenario files to run"
                : "no scenario" +
                      std::string(options.filter.find('/') == std::string::npos ? "" : " with a variant that") +
                      " matches --filter '" + options.filter + "'")
        << "\n";
    // A scenario whose name matched: which variants it has, for the typo.
    for (const ScenarioResult& s : report.skipped) {
      if (s.error.find("(no variant matches") != std::string::npos) err << "  " << s.name << ": " << s.error << "\n";
    }
    return kExitUsage;
  }
  int code = kExitOk;
  for (const ScenarioResult& s : report.scenarios) {
    if (IsFailure(s.code)) code = kExitFailures;
  }
  if (HasInputError(report)) code = kExitUsage;  // the run cannot be judged until its input is right
  if (!outputs_ok) {
    err << CommandPrefix("run") << "exit " << code + kExitOutputFailed << ": the run "
        << (code == kExitOk ? "passed" : "failed") << ", and an output above could not be written\n";
  }
  return outputs_ok ? code : code + kExitOutputFailed;
}

class RunCommand : public Command {
 public:
  CLI::App* Add(CLI::App& app) override {
    CLI::App* run = app.add_subcommand("run", "Run scenarios under a card's memory cap and check their expectations");
    run->add_option("paths", o_.paths, "Scenario files or folders (default: the built-in catalog)");
    run->add_option("--filter", o_.filter,
                    "Only scenarios whose name matches this glob; SCENARIO/VARIANT also picks variants (e.g. "
                    "'forgotten-no-grad/fixed', '*/pitfall*')");
    AddShardFlag(run, &o_);
    AddRunFlags(run, &o_);
    run->add_option("--jobs,-j", o_.jobs, "Variants measured at once, each in its own process")
        ->check(CLI::Range(1, 256));
    AddTimeoutFlag(run, &o_.timeout_seconds);
    run->add_option("--json", o_.json_path, "Write every measured number to this file");
    std::string report_help = "Also write a report (repeatable):";
    for (const std::string& format : ReportFormatNames()) report_help += " " + format + "=FILE";
    run->add_option("--report", o_.reports, report_help);
    run->add_option("--baselines", o_.baselines_dir, "Baseline folder (default: baselines/ beside each scenario)");
    run->add_flag("--update-baselines", o_.update_baselines,
                  "Record this run's numbers as the baselines (variants that met their expectations)");
    run->add_flag("--strict", o_.strict, "Fail variants that have no baseline (for CI)");
    return run;
  }
  int Run(const std::string& self_exe, std::ostream& out, std::ostream& err) override {
    return RunAndReport(o_, self_exe, out, err);
  }

 private:
  RunOptions o_;
};

}  // namespace

std::unique_ptr<Command> MakeRunCommand() { return std::make_unique<RunCommand>(); }

}  // namespace oomguard
