// The oomguard command line: parses flags, wires the layers below, and maps outcomes to exit codes.
//
// Exit codes: 0 success, 1 failures found (a scenario failed or regressed), 2 usage or input error.
// RunCli never throws; it writes to the given streams so tests can check output and codes exactly.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace oomguard {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailures = 1;
inline constexpr int kExitUsage = 2;

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace oomguard
