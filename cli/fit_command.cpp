#include "cli/fit_command.h"

#include <ATen/Parallel.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <fstream>
#include <iostream>

#include "allocators/cards.h"
#include "allocators/ledger.h"
#include "backends/backend.h"
#include "base/byte_size.h"
#include "base/did_you_mean.h"
#include "base/exit_codes.h"
#include "base/host_memory.h"
#include "cli/command.h"
#include "cli/program_name.h"
#include "cli/run_flags.h"
#include "fit/fit_search.h"
#include "fit/fit_trial.h"
#include "fit/fit_world.h"
#include "reports/console_writer.h"
#include "reports/fit_progress.h"
#include "reports/fit_report.h"
#include "scenario/catalog.h"
#include "scenario/scenario_loader.h"
#include "workload/workload_registry.h"

namespace oomguard {
namespace {

using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

bool LoadFitScenario(const FitOptions& options, Scenario* scenario, std::string* error) {
  return LoadScenarioArgument(NameSearchPaths(options.paths), options.scenario, scenario, error);
}

// `auto`: meta when the scenario lists it (shapes only: any cap fits in this host), else cpu.
bool ChooseBackend(const std::string& requested, const Scenario& scenario, Backend* backend, std::string* error) {
  const auto lists = [&](Backend b) {
    return std::find(scenario.backends.begin(), scenario.backends.end(), Name(b)) != scenario.backends.end();
  };
  *backend = requested != "auto" ? BackendNamed(requested) : lists(Backend::kMeta) ? Backend::kMeta : Backend::kCpu;
  const BackendDriver& driver = GetBackend(*backend);
  if (!lists(*backend)) {
    *error = "--backend " + driver.name() + ": scenario '" + scenario.name +
             "' does not run there (its backends: " + JoinNames(scenario.backends, ", ") + ")";
    return false;
  }
  if (std::string why; !driver.Available(&why)) {
    *error = "--backend " + driver.name() + ": " + why;
    return false;
  }
  return true;
}

bool SelectVariants(const Scenario& scenario, const std::vector<std::string>& names,
                    std::vector<const VariantSpec*>* selected, std::string* error) {
  std::vector<std::string> known;
  for (const VariantSpec& v : scenario.variants) known.push_back(v.name);
  for (const VariantSpec& v : scenario.variants) {
    if (names.empty() || std::find(names.begin(), names.end(), v.name) != names.end()) selected->push_back(&v);
  }
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string near = ClosestMatch(name, known);
    *error = "--variant " + name + ": scenario '" + scenario.name + "' has no such variant" +
             (near.empty() ? "" : "; did you mean '" + near + "'?") + " (variants: " + JoinNames(known, ", ") + ")";
    return false;
  }
  return true;
}

bool ResolveTargets(const FitOptions& options, std::vector<FitTarget>* targets, std::string* error) {
  for (const std::string& name : options.cards) {
    const CardPreset* card = FindCard(name, error);
    if (card == nullptr) {
      *error = "--cards: " + *error;
      return false;
    }
    const bool seen =
        std::any_of(targets->begin(), targets->end(), [&](const FitTarget& t) { return t.card == card->key; });
    if (!seen) targets->push_back({std::string(card->key), card->allocator_cap_bytes()});
  }
  for (const std::string& text : options.caps) {
    int64_t cap = 0;
    if (!ParseByteSize(text, &cap, error)) {
      *error = "--cap: " + *error;
      return false;
    }
    if (cap <= 0) {
      *error = "--cap: the cap must be larger than 0 bytes";
      return false;
    }
    targets->push_back({"", cap});
  }
  if (options.cards.empty() && options.caps.empty()) {
    for (const CardPreset& card : AllCards()) targets->push_back({std::string(card.key), card.allocator_cap_bytes()});
  }
  return true;
}

// Note [cpu fits allocate for real]: a cpu trial computes, so a search towards a cap allocates up to
// that cap in host memory, plus the host-side copy of each batch, which the ledger leaves out (Note [Host
// memory on the cpu backend]). Past what the host has free the kernel's OOM killer, not the cap, would
// end the search (and perhaps other work), so caps above half the available memory are refused.
bool CheckHostMemory(Backend backend, const std::vector<FitTarget>& targets, std::string* error) {
  if (!TraitsOf(backend).allocates_host_memory) return true;
  const int64_t available = ReadHostMemory().available_bytes;
  if (available == 0) return true;
  for (const FitTarget& t : targets) {
    if (t.cap_bytes <= available / 2) continue;
    *error = "--backend " + std::string(Name(backend)) + ": trials up to " + TargetLabel(t.card, t.cap_bytes) +
             " would allocate that much host memory and more, and this host has " + FormatBytes(available) +
             " available (cpu caps may use half); use --backend meta (shapes only) or smaller caps";
    return false;
  }
  return true;
}

std::string OutcomeWord(const Trial& t) {
  switch (t.outcome) {
    case Trial::Outcome::kFits:
      return "fits";
    case Trial::Outcome::kOom:
      return "does not fit";
    case Trial::Outcome::kError:
      break;
  }
  return "error";
}

// A --json FILE whose folder does not exist fails now, not after minutes of trials.
bool CheckJsonFolder(const std::string& path, std::string* error) {
  const size_t slash = path.find_last_of('/');
  if (path.empty() || slash == std::string::npos || slash == 0) return true;
  struct stat info {};
  if (stat(path.substr(0, slash).c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return true;
  *error = "--json " + path + ": no folder " + path.substr(0, slash);
  return false;
}

// Note [A workload whose memory does not fall] (fit/fit_world.h): its probe's cap.
int64_t ProbeCap(Backend backend, const std::vector<FitTarget>& targets) {
  if (!TraitsOf(backend).allocates_host_memory) return Ledger::kUnlimited;
  int64_t largest = 0;
  for (const FitTarget& t : targets) largest = std::max(largest, t.cap_bytes);
  return largest;
}

// --knob world: the world sizes searched, and the variants with `parallel` (Note [What a world fit
// fits], fit/fit_world.h).
bool PrepareWorld(const FitOptions& options, int64_t max_value, const Scenario& scenario, KnobValues* values,
                  FitResults* report, std::vector<const VariantSpec*>* variants, std::string* error) {
  const int64_t per_node = options.gpus_per_node > 0 ? options.gpus_per_node : kDefaultGpusPerNode;
  if (!std::has_single_bit(static_cast<uint64_t>(per_node))) {
    *error = "--gpus-per-node " + std::to_string(per_node) +
             ": not a power of two (world sizes are the powers of two below it, then its multiples)";
    return false;
  }
  *values = KnobValues::Nodes(options.min_value, max_value, per_node);
  if (values->empty()) {
    *error = "--knob world: no world size in " + std::to_string(options.min_value) + ".." + std::to_string(max_value) +
             " (world sizes: the powers of two below --gpus-per-node " + std::to_string(per_node) +
             ", then its multiples)";
    return false;
  }
  if (!SelectWorldVariants(scenario.name, !options.variants.empty(), variants, &report->left_out, error)) return false;
  for (const VariantSpec* v : *variants) {
    if (!CheckWorldKnob(*v, *values, error)) return false;
  }
  report->smallest = true;
  report->own_ranks = !variants->empty() && std::all_of(variants->begin(), variants->end(),
                                                        [](const VariantSpec* v) { return !v->workload.empty(); });
  report->gpus_per_node = per_node;
  report->min_value = values->first();
  report->max_value = values->last();
  return true;
}

// Everything FitCommand checks before the first trial; false with the message for exit code 2.
bool Prepare(const FitOptions& options, FitResults* report, Backend* backend, std::vector<const VariantSpec*>* variants,
             std::vector<FitTarget>* targets, Scenario* scenario, CachingAllocatorConfig* alloc_conf,
             KnobValues* values, std::string* error) {
  const bool world = options.knob == kWorldKnob;
  const int64_t max_value = options.max_value > 0 ? options.max_value : world ? kDefaultMaxWorld : 1048576;
  if (options.min_value > max_value) {
    *error = "--min " + std::to_string(options.min_value) + " is larger than --max " + std::to_string(max_value);
    return false;
  }
  if (!world && options.gpus_per_node > 0) {
    *error = "--gpus-per-node applies to --knob world only";
    return false;
  }
  std::string alloc_conf_text;
  if (!ResolveAllocConf(options.alloc_conf, &alloc_conf_text, alloc_conf, error)) return false;
  if (!LoadFitScenario(options, scenario, error) || !ChooseBackend(options.backend, *scenario, backend, error) ||
      !SelectVariants(*scenario, options.variants, variants, error) || !ResolveTargets(options, targets, error) ||
      !CheckKernelsFlag(options.kernels, std::string(Name(*backend)), error) ||
      !CheckHostMemory(*backend, *targets, error) || !CheckJsonFolder(options.json_path, error)) {
    return false;
  }
  if (std::string why; !WorkloadsRegistered(*scenario, &why)) {
    *error = scenario->file + ": " + why;
    return false;
  }
  report->backend = Name(*backend);
  report->min_value = options.min_value;
  report->max_value = max_value;
  *values = KnobValues::Integers(options.min_value, max_value);
  if (world) {
    if (!PrepareWorld(options, max_value, *scenario, values, report, variants, error)) return false;
  } else {
    for (const VariantSpec* v : *variants) {
      if (!CheckKnob(options.knob, *v, options.min_value, max_value, error)) return false;
    }
  }
  report->scenario = scenario->name;
  report->knob = options.knob;
  report->knob_field = KnobField(options.knob, variants->empty() ? VariantSpec{} : *variants->front());
  report->iterations = options.iterations;
  return true;
}

}  // namespace

int FitCommand(const FitOptions& options, std::ostream& out, std::ostream& err, const MeasureFunction& measure) {
  FitResults report;
  Scenario scenario;
  std::vector<const VariantSpec*> variants;
  std::vector<FitTarget> targets;
  Backend backend = Backend::kCpu;
  std::string error;
  CachingAllocatorConfig alloc_conf;
  KnobValues values = KnobValues::Integers(1, 1);
  if (!Prepare(options, &report, &backend, &variants, &targets, &scenario, &alloc_conf, &values, &error)) {
    err << CommandPrefix("fit") << error << "\n";
    return kExitUsage;
  }
  // As in the runner's children: exact bytes must not depend on the machine's core count.
  at::set_num_threads(1);
  const ConsoleStyle style = &err == &std::cerr ? StyleFor(STDERR_FILENO) : ConsoleStyle{};
  FitProgress progress(err, style.terminal, report.knob_field, report.smallest);
  const Clock::time_point start = Clock::now();
  try {
    for (const VariantSpec* v : variants) {
      const TrialFunction measured = MakeFitTrial(
          *v, options.knob, backend, options.iterations, options.timeout_seconds, measure,
          ModelCudaFor(options.verdict, /*model_cuda=*/false), alloc_conf, options.kernels == kKernelsCuda);
      int64_t card_trials = 0;
      Clock::time_point card_start = Clock::now();
      std::vector<std::string> warnings;
      std::string steady_state, why_none;
      // Notes [A strategy whose peak does not fall] and [A workload whose memory does not fall]
      // (fit/fit_world.h): ddp, and a workload that shards nothing, are tried at the first world only.
      const int64_t probe_cap = ProbeCap(backend, targets);
      const std::string probe_label = probe_cap == Ledger::kUnlimited ? "no cap" : TargetLabel("", probe_cap);
      int64_t probed = 0;
      const std::string note =
          report.smallest ? WorldDoesNotFall(*v, values, measured, probe_cap,
                                             [&](int64_t n, int64_t of, int64_t world, const Trial& trial) {
                                               probed = n;
                                               progress.OnProbeTrial(v->name, probe_label, n, of, world,
                                                                     OutcomeWord(trial), MillisecondsSince(card_start));
                                             })
                          : "";
      if (probed > 0) {  // the probe's line, and the first card's clock starts after it
        progress.OnProbeDone(v->name, probe_label, probed, !note.empty(), values.first(),
                             MillisecondsSince(card_start));
        card_start = Clock::now();
      }
      const KnobValues searched =
          note.empty() ? values : KnobValues::Nodes(values.first(), values.first(), values.per_node());
      const FitDirection direction = report.smallest ? FitDirection::kSmallestFitting : FitDirection::kLargestFitting;
      FitSearch search(searched, direction, [&](int64_t value, const FitTarget& target) {
        const Trial trial = measured(value, target);
        if (steady_state.empty()) steady_state = trial.steady_state;
        // The first OOM at the last world is at the largest cap that met one (caps go largest first).
        if (report.smallest && value == searched.last() && why_none.empty() && !trial.oom_detail.empty()) {
          why_none = "at world " + std::to_string(value) + " on " + TargetLabel(target.card, target.cap_bytes) + " " +
                     trial.oom_detail;
        }
        for (const std::string& w : trial.warnings) {
          if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
        }
        progress.OnTrial(v->name, TargetLabel(target.card, target.cap_bytes), ++card_trials, value, OutcomeWord(trial),
                         MillisecondsSince(card_start));
        return trial;
      });
      std::vector<CardFit> cards = FitTargets(search, targets, [&](const CardFit& fit) {
        progress.OnCardDone(v->name, fit, MillisecondsSince(card_start));
        card_start = Clock::now();
        card_trials = 0;
      });
      const bool any_none = std::any_of(cards.begin(), cards.end(), [](const CardFit& c) {
        return c.error.empty() && !c.min_value && c.last_oom_value;
      });
      report.variants.push_back({v->name, std::move(cards), std::move(warnings), std::move(steady_state),
                                 report.smallest ? WorldStrategy(*v) : "", note, any_none ? why_none : ""});
    }
  } catch (const LeakBetweenTrials& leak) {
    progress.Finish();
    err << CommandPrefix("fit") << leak.what() << "\n";
    return kExitFailures;
  } catch (const InputErrorInTrial& wrong) {
    progress.Finish();
    err << CommandPrefix("fit") << scenario.file << ": " << wrong.what() << "\n";
    return kExitUsage;
  } catch (const TrialTimedOut& stuck) {
    // Note [A trial that does not end]: its thread still runs and cannot be stopped; only the
    // process's end stops it, before any destructor could touch what it holds.
    progress.Finish();
    err << CommandPrefix("fit") << stuck.what() << "\n";
    err.flush();
    out.flush();
    std::_Exit(kExitFailures);
  }
  progress.Finish();
  report.duration_ms = MillisecondsSince(start);
  WriteFitTable(report, out);
  if (!options.json_path.empty()) {
    if (!WriteFitJson(report, options.json_path, &error)) {
      err << CommandPrefix("fit") << error << "\n";
      return kExitUsage;
    }
    out << "results: " << options.json_path << "\n";
  }
  for (const VariantFit& v : report.variants) {
    for (const CardFit& fit : v.cards) {
      if (!fit.error.empty()) return kExitFailures;
    }
  }
  return kExitOk;
}

namespace {

class FitCli : public Command {
 public:
  CLI::App* Add(CLI::App& app) override {
    CLI::App* fit = app.add_subcommand(
        "fit", "Find, per card, the largest batch (or sequence length) each variant fits, or the smallest world size");
    fit->add_option("scenario", o_.scenario, "A scenario name (see `oomguard list`) or a .json file")->required();
    fit->add_option("--variant", o_.variants, "Only this variant (repeatable; default: all)");
    knob_ = fit->add_option("--knob", o_.knob,
                            "What to vary: batch (data.batch), seq (data.shape[0]) or world (parallel.world: the "
                            "smallest world size that fits); for a workload scenario, any of its integer knobs");
    fit->add_flag("--world", world_, "Short for --knob world");
    fit->add_option("--gpus-per-node", o_.gpus_per_node,
                    "--knob world: world sizes are the powers of two below N, then multiples of N (default 8; 1: "
                    "every size)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    fit->add_option("--cards,--card", o_.cards, "Cards to fit, e.g. t4,a100-80gb (default: every preset)")
        ->delimiter(',');
    fit->add_option("--cap", o_.caps, "Also fit this cap, e.g. 12GiB (repeatable)");
    fit->add_option("--backend", o_.backend, BackendChoicesText() + ": meta when the scenario lists it")
        ->check(CLI::IsMember(BackendChoices()));
    fit->add_option("--min", o_.min_value, "Smallest value tried (default 1)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
    fit->add_option("--max", o_.max_value, "Largest value tried (default 1048576; world: 4096)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
    fit->add_option("--iterations", o_.iterations, "Training iterations per trial (default: the scenario's)")
        ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
    AddTimeoutFlag(fit, &o_.timeout_seconds);
    fit->add_option("--json", o_.json_path, "Also write the results to this file");
    fit->add_option("--paths", o_.paths, "Where to look a name up (default: the built-in catalog)");
    AddVerdictFlags(fit, &o_.verdict, &o_.alloc_conf);
    AddKernelsFlag(fit, &o_.kernels);
    return fit;
  }
  int Run(const std::string&, std::ostream& out, std::ostream& err) override {
    if (world_) {
      if (knob_->count() > 0 && o_.knob != kWorldKnob) {
        err << CommandPrefix("fit") << "--world is --knob world; it cannot go with --knob " << o_.knob << "\n";
        return kExitUsage;
      }
      o_.knob = kWorldKnob;
    }
    return FitCommand(o_, out, err);
  }

 private:
  FitOptions o_;
  CLI::Option* knob_ = nullptr;
  bool world_ = false;
};

}  // namespace

std::unique_ptr<Command> MakeFitCommand() { return std::make_unique<FitCli>(); }

}  // namespace oomguard
