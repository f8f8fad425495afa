#include "harness/cli.h"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "allocators/byte_size.h"
#include "allocators/cards.h"
#include "harness/run_options.h"
#include "harness/version_info.h"

namespace oomguard {
namespace {

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

int PrintCards(bool with_sources, std::ostream& out) {
  out << Pad("card", 12) << Pad("name", 32) << Pad("reported", 12) << Pad("context", 13) << "cap (usable)\n";
  for (const CardPreset& card : AllCards()) {
    out << Pad(std::string(card.key), 12) << Pad(std::string(card.display_name), 32)
        << Pad(FormatBytes(card.total_bytes), 12) << Pad(FormatBytes(card.context_bytes), 13)
        << FormatBytes(card.allocator_cap_bytes()) << "\n";
    if (with_sources) out << "    source: " << card.source << "\n";
  }
  out << "\nreported: the total CUDA reports (torch.cuda.get_device_properties().total_memory);\n"
         "cap: what oomguard lets tensors hold, the reported total minus the modelled CUDA context.\n";
  return kExitOk;
}

int Run(const RunOptions& options, std::ostream& out, std::ostream& err) {
  Limits limits;
  std::string error;
  if (!ResolveLimits(options, kDefaultCard, &limits, &error)) {
    err << "oomguard run: " << error << "\n";
    return kExitUsage;
  }
  err << "oomguard run: the scenario engine is not built yet (resolved cap: " << FormatBytes(limits.cap_bytes)
      << (limits.card.empty() ? "" : " for " + limits.card) << ")\n";
  return kExitUsage;
}

}  // namespace

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"oomguard: catch GPU-memory regressions and reproduce out-of-memory failures of "
               "LibTorch training code"};
  app.name("oomguard");
  app.require_subcommand(0, 1);
  bool show_version = false;
  app.add_flag("--version", show_version, "Print the tool, LibTorch and CUDA versions and the backends");

  CLI::App* cards = app.add_subcommand("cards", "List the card presets --card accepts");
  bool with_sources = false;
  cards->add_flag("--sources", with_sources, "Show where each card's capacity comes from");

  RunOptions run_options;
  CLI::App* run = app.add_subcommand("run", "Run scenarios under a card's memory cap");
  run->add_option("paths", run_options.paths, "Scenario files or folders (default: the built-in catalog)");
  run->add_option("--filter", run_options.filter, "Only scenarios whose name matches this glob");
  run->add_option("--backend", run_options.backend, "cpu, meta, cuda or auto")
      ->check(CLI::IsMember({"cpu", "meta", "cuda", "auto"}));
  CLI::Option* card = run->add_option("--card", run_options.card, "Simulate this card (see `oomguard cards`)");
  CLI::Option* cap = run->add_option("--cap", run_options.cap, "Cap tensor memory at SIZE, e.g. 12GiB, 15.5GB, 1e9");
  card->excludes(cap);
  run->add_option("--context", run_options.context, "Override the modelled CUDA context of --card");
  run->add_option("--inject", run_options.inject,
                  "Inject allocation failures, e.g. nth=5, min-size=64MiB, p=0.01,seed=7, phase=backward,nth=2");
  run->add_option("--jobs,-j", run_options.jobs, "Scenarios run at once")->check(CLI::Range(1, 256));
  run->add_option("--iterations", run_options.iterations, "Training iterations per variant")
      ->check(CLI::Range(1, 1000000));
  run->add_option("--json", run_options.json_path, "Write every measured number to this file");

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
  if (cards->parsed()) return PrintCards(with_sources, out);
  if (run->parsed()) return Run(run_options, out, err);
  out << app.help();
  return kExitOk;
}

}  // namespace oomguard
