#include "cli/cli.h"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/compare_command.h"
#include "reports/report_registry.h"
#include "cli/fit_command.h"
#include "run/child_protocol.h"
#include "run/measure_child.h"
#include "run/run_options.h"
#include "backends/version_info.h"
#include "base/did_you_mean.h"
#include "model/backend.h"

namespace oomguard {
namespace {

// What --backend takes: a backend's name, or the request "auto".
std::vector<std::string> BackendChoices() {
  std::vector<std::string> choices = AllNames<Backend>();
  choices.push_back("auto");
  return choices;
}

// "cpu, meta, cuda, or auto".
std::string BackendChoicesText() { return JoinNames(AllNames<Backend>(), ", ") + ", or auto"; }

// The flags `run` and `explain` share (a child gets its own from run/child_protocol.h).
void AddRunFlags(CLI::App* app, RunOptions* o) {
  app->add_option("--backend", o->backend, BackendChoicesText() + " (default): cuda when a GPU is visible, else cpu")
      ->check(CLI::IsMember(BackendChoices()));
  CLI::Option* card = app->add_option("--card", o->card, "Simulate this card (see `oomguard cards`; default t4)");
  CLI::Option* cap = app->add_option("--cap", o->cap, "Cap tensor memory at SIZE, e.g. 12GiB, 15.5GB, 1e9");
  card->excludes(cap);
  app->add_option("--context", o->context, "Override the modelled CUDA context of --card");
  app->add_option("--inject", o->inject,
                  "Inject allocation failures, e.g. nth=5, min-size=64MiB, p=0.01,seed=7, phase=backward,nth=2");
  app->add_option("--iterations", o->iterations, "Training iterations per variant (default: the scenario's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  CLI::Option* snapshot_dir = app->add_option(
      "--snapshot-dir", o->snapshot_dir,
      "Record allocations; write a memory_viz snapshot (pickle) of each failing or OOM variant into DIR");
  app->add_flag("--snapshot-all", o->snapshot_all, "With --snapshot-dir: a snapshot of every variant")->needs(snapshot_dir);
  app->add_flag("--model-cuda", o->model_cuda,
                "On cpu and meta: predict the CUDA caching allocator's allocated/reserved peaks, retries and OOMs");
}

// The binary itself, for spawning children: /proc/self/exe is exact even when argv[0] is a bare name.
// Tests run RunCli inside the test binary and point OOMGUARD_SELF at the real oomguard.
std::string SelfExecutable(const std::vector<std::string>& args) {
  if (const char* self = std::getenv("OOMGUARD_SELF"); self && *self) return self;
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);  // Note [No std::filesystem]
  if (n > 0) return std::string(buffer, static_cast<size_t>(n));
  return args.empty() ? "oomguard" : args.front();
}

}  // namespace

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // Internal: one variant in a child process, asked in the runner's protocol (run/child_protocol.h),
  // which alone reads and writes its flags.
  if (args.size() >= 2 && args[1] == kMeasureCommand) {
    MeasureRequest request;
    std::string error;
    if (!ParseMeasureRequest({args.begin() + 2, args.end()}, &request, &error)) {
      err << "oomguard " << kMeasureCommand << ": " << error << "\n";
      return kExitUsage;
    }
    return MeasureInChild(request, err);
  }
  CLI::App app{"oomguard: catch GPU-memory regressions and reproduce out-of-memory failures of "
               "LibTorch training code"};
  app.name("oomguard");
  app.require_subcommand(0, 1);
  bool show_version = false;
  app.add_flag("--version", show_version, "Print the tool, LibTorch and CUDA versions and the backends");

  CLI::App* cards = app.add_subcommand("cards", "List the card presets --card accepts");
  bool with_sources = false;
  cards->add_flag("--sources", with_sources, "Show where each card's capacity comes from");

  RunOptions options;
  CLI::App* run = app.add_subcommand("run", "Run scenarios under a card's memory cap and check their expectations");
  run->add_option("paths", options.paths, "Scenario files or folders (default: the built-in catalog)");
  run->add_option("--filter", options.filter, "Only scenarios whose name matches this glob");
  AddRunFlags(run, &options);
  run->add_option("--jobs,-j", options.jobs, "Variants measured at once, each in its own process")
      ->check(CLI::Range(1, 256));
  run->add_option("--timeout", options.timeout_seconds, "Seconds a variant may take before it is killed")
      ->check(CLI::Range(1.0, 86400.0));
  run->add_option("--json", options.json_path, "Write every measured number to this file");
  std::string report_help = "Also write a report (repeatable):";
  for (const std::string& format : ReportFormatNames()) report_help += " " + format + "=FILE";
  run->add_option("--report", options.reports, report_help);
  run->add_option("--baselines", options.baselines_dir, "Baseline folder (default: baselines/ beside each scenario)");
  run->add_flag("--update-baselines", options.update_baselines,
                "Record this run's numbers as the baselines (variants that met their expectations)");
  run->add_flag("--strict", options.strict, "Fail variants that have no baseline (for CI)");

  CLI::App* list = app.add_subcommand("list", "List the scenarios of the catalog (or of the given paths)");
  list->add_option("paths", options.paths, "Scenario files or folders (default: the built-in catalog)");

  std::string name;
  CLI::App* explain = app.add_subcommand("explain", "Teach a pitfall: what goes wrong, why, the fix, measured now");
  explain->add_option("name", name, "A scenario name (see `oomguard list`)")->required();
  explain->add_option("--paths", options.paths, "Where to look (default: the built-in catalog)");
  AddRunFlags(explain, &options);

  FitOptions fit_options;
  CLI::App* fit = app.add_subcommand("fit", "Find, per card, the largest batch (or sequence length) each variant fits");
  fit->add_option("scenario", fit_options.scenario, "A scenario name (see `oomguard list`) or a .json file")
      ->required();
  fit->add_option("--variant", fit_options.variants, "Only this variant (repeatable; default: all)");
  fit->add_option("--knob", fit_options.knob, "What to vary: batch (data.batch) or seq (data.shape[0])")
      ->check(CLI::IsMember({"batch", "seq"}));
  fit->add_option("--cards,--card", fit_options.cards, "Cards to fit, e.g. t4,a100-80gb (default: every preset)")
      ->delimiter(',');
  fit->add_option("--cap", fit_options.caps, "Also fit this cap, e.g. 12GiB (repeatable)");
  fit->add_option("--backend", fit_options.backend, BackendChoicesText() + ": meta when the scenario lists it")
      ->check(CLI::IsMember(BackendChoices()));
  fit->add_option("--min", fit_options.min_value, "Smallest value tried (default 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  fit->add_option("--max", fit_options.max_value, "Largest value tried (default 1048576)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  fit->add_option("--iterations", fit_options.iterations, "Training iterations per trial (default: the scenario's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  fit->add_option("--json", fit_options.json_path, "Also write the results to this file");
  fit->add_option("--paths", fit_options.paths, "Where to look a name up (default: the built-in catalog)");

  CompareOptions compare_options;
  CLI::App* compare = app.add_subcommand("compare", "Set the peaks of several runs (backends) side by side");
  compare->add_option("results", compare_options.files, "Results files of `oomguard run --json FILE`, two or more")
      ->required()
      ->check(CLI::ExistingFile);
  compare->add_option("--reference", compare_options.reference,
                      "The run the others are measured against: a backend, or a position from 1 (default: the last)");
  compare->add_option("--tolerance", compare_options.tolerance_percent,
                      "Percent a peak may differ from the reference's and still agree (default 2)")
      ->check(CLI::Range(0.0, 100.0));
  compare->add_option("--md", compare_options.markdown_path, "Also write the table as Markdown to this file");

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  if (!reversed.empty()) reversed.pop_back();  // the program name
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? kExitOk : kExitUsage;
  }

  if (show_version) {
    out << FormatVersionInfo(CollectVersionInfo());
    return kExitOk;
  }
  const std::string self_exe = SelfExecutable(args);
  if (cards->parsed()) return CardsCommand(with_sources, out);
  if (run->parsed()) return RunCommand(options, self_exe, out, err);
  if (list->parsed()) return ListCommand(options, out, err);
  if (explain->parsed()) {
    options.backend_given = explain->get_option("--backend")->count() > 0;
    return ExplainCommand(options, name, self_exe, out, err);
  }
  if (fit->parsed()) return FitCommand(fit_options, out, err);
  if (compare->parsed()) return CompareCommand(compare_options, out, err);
  out << app.help();
  return kExitOk;
}

}  // namespace oomguard
