// The exit codes of every oomguard command, and of a measuring child: 0 success, 1 failures found
// (a scenario failed or regressed), 2 usage or input error.
#pragma once

namespace oomguard {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailures = 1;
inline constexpr int kExitUsage = 2;

}  // namespace oomguard
