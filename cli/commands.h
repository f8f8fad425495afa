// The CLI's commands, each taking parsed options and streams and returning an exit code (cli.h).
#pragma once

#include <ostream>
#include <string>

#include "run/run_options.h"

namespace oomguard {

int CardsCommand(bool with_sources, std::ostream& out);
int RunCommand(const RunOptions& options, const std::string& self_exe, std::ostream& out, std::ostream& err);
int ListCommand(const RunOptions& options, std::ostream& out, std::ostream& err);
int ExplainCommand(const RunOptions& options, const std::string& name, const std::string& self_exe, std::ostream& out,
                   std::ostream& err);

}  // namespace oomguard
