#include "cli/cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "backends/version_info.h"
#include "base/did_you_mean.h"
#include "cli/command.h"
#include "cli/program_name.h"
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

// CLI11's message for an argument it did not expect, with a did-you-mean for a near spelling of a flag
// of the command it was given to, or of a command, as scenario names and knobs have: "The following
// argument was not expected: --bakend (--bakend: did you mean --backend?)".
std::string FailureMessage(const CLI::App* app, const CLI::Error& e) {
  std::string message = CLI::FailureMessage::simple(app, e);
  const std::string what = e.what();
  const size_t colon = what.find(": ");
  // Not get_name(): a subcommand's ExtrasError carries the command's name there.
  if (dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr || colon == std::string::npos) return message;
  const CLI::App* command = app;
  for (std::vector<CLI::App*> parsed; !(parsed = command->get_subcommands()).empty();) command = parsed.back();
  std::vector<std::string> flags, commands;
  for (const CLI::Option* option : command->get_options()) {
    for (const std::string& name : option->get_lnames()) flags.push_back(name);
  }
  std::vector<std::string> every_flag;  // of every command: one given to a command without it is no typo
  for (const CLI::App* sub : app->get_subcommands({})) {
    if (command == app) commands.push_back(sub->get_name());
    for (const CLI::Option* option : sub->get_options()) {
      for (const std::string& name : option->get_lnames()) every_flag.push_back(name);
    }
  }
  std::string hints;
  std::istringstream words(what.substr(colon + 2));
  for (std::string word; words >> word;) {
    const bool flag = word.starts_with("--");
    const std::string name = flag ? word.substr(2, word.find('=') - 2) : word;
    const std::string near = ClosestMatch(name, flag ? flags : commands);
    if (near.empty() || (flag && std::find(every_flag.begin(), every_flag.end(), name) != every_flag.end())) continue;
    hints += (hints.empty() ? "" : ", ") + word + ": did you mean " + (flag ? "--" : "") + near + "?";
  }
  if (hints.empty()) return message;
  return message.insert(message.find('\n'), " (" + hints + ")");
}

}  // namespace

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (!args.empty()) SetProgramName(args.front());  // a user's binary names itself in its messages
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
  app.name(ProgramName());
  app.failure_message(FailureMessage);  // before the subcommands, which copy it
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
