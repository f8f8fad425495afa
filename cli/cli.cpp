#include "cli/cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "backends/version_info.h"
#include "cli/command.h"
#include "run/child_protocol.h"
#include "run/measure_child.h"

namespace oomguard {
namespace {

using CommandFactory = std::unique_ptr<Command> (*)();

// The subcommands, in the order `oomguard --help` lists them; each is one file (cli/command.h).
constexpr CommandFactory kCommands[] = {&MakeCardsCommand,   &MakeRunCommand, &MakeListCommand,
                                        &MakeExplainCommand, &MakeFitCommand, &MakeCompareCommand};

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
  CLI::App app{
      "oomguard: catch GPU-memory regressions and reproduce out-of-memory failures of "
      "LibTorch training code"};
  app.name("oomguard");
  app.require_subcommand(0, 1);
  bool show_version = false;
  app.add_flag("--version", show_version, "Print the tool, LibTorch and CUDA versions and the backends");

  std::vector<std::pair<std::unique_ptr<Command>, CLI::App*>> commands;
  for (const CommandFactory make : kCommands) {
    std::unique_ptr<Command> command = make();
    CLI::App* sub = command->Add(app);
    commands.emplace_back(std::move(command), sub);
  }

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
  for (const auto& [command, sub] : commands) {
    if (sub->parsed()) return command->Run(self_exe, out, err);
  }
  out << app.help();
  return kExitOk;
}

}  // namespace oomguard
