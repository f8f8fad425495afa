// The oomguard command line: parses flags, wires the layers below, and maps outcomes to exit codes.
//
// Exit codes: 0 success, 1 failures found (a scenario failed or regressed), 2 usage or input error.
// RunCli never throws; it writes to the given streams so tests can check output and codes exactly.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "base/exit_codes.h"

namespace oomguard {

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace oomguard
