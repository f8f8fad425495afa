// The exit codes of every oomguard command, and of a measuring child: 0 success, 1 failures found
// (a scenario failed or regressed), 2 usage or input error. `run` adds 4 when an output (a report, the
// results JSON, a baseline update) could not be written after the run: 4 means the run passed, 5 that
// it failed; the run's own verdict is never hidden by a disk that filled up.
#pragma once

namespace oomguard {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailures = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitOutputFailed = 4;  // added to kExitOk or kExitFailures
// A measuring child that is one of a variant's real ranks wrote its measurement, which did not pass
// (an OOM, an error): the runner reads it and ends the rank's siblings (Note [A failing rank ends the
// variant], run/rank_children.h).
inline constexpr int kExitRankFailed = 3;

}  // namespace oomguard
