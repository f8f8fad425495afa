// One `oomguard` subcommand per file (cli/<name>_command.cpp): it adds itself to the command line, its
// options bound to its own members, and runs when the command line chose it.
//
//   class ListCommand : public Command {
//     CLI::App* Add(CLI::App& app) override {
//       CLI::App* list = app.add_subcommand("list", "List the scenarios");
//       list->add_option("paths", paths_, "Scenario files or folders");
//       return list;
//     }
//     int Run(const std::string& self_exe, std::ostream& out, std::ostream& err) override { ... }
//   };
//
// Adding a command: its file, defining MakeXCommand(); the declaration below; one line in kCommands
// (cli.cpp), which sets the order `oomguard --help` lists them in; the file in CMakeLists.txt's oomguard_cli.
// Error policy: Run returns an exit code (base/exit_codes.h) and writes its messages to `err`; it never throws.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <ostream>
#include <string>

namespace oomguard {

class Command {
 public:
  virtual ~Command() = default;
  // Adds the subcommand and its options to `app`; returns the subcommand.
  virtual CLI::App* Add(CLI::App& app) = 0;
  // Runs with the parsed options. `self_exe`: this binary, for commands that spawn measuring children.
  virtual int Run(const std::string& self_exe, std::ostream& out, std::ostream& err) = 0;
};

std::unique_ptr<Command> MakeCardsCommand();
std::unique_ptr<Command> MakeRunCommand();
std::unique_ptr<Command> MakeListCommand();
std::unique_ptr<Command> MakeExplainCommand();
std::unique_ptr<Command> MakeFitCommand();
std::unique_ptr<Command> MakeCompareCommand();

}  // namespace oomguard
