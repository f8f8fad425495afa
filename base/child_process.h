// Runs commands as child processes, at most N at a time, each with a timeout: the isolation that
// keeps a scenario that aborts, segfaults or hangs from taking the whole run down.
//
//   std::vector<oomguard::ChildSpec> specs = ...;  // argv, where stdout/stderr go, timeout
//   oomguard::RunChildren(specs, /*max_running=*/2, [](size_t i, const oomguard::ChildExit& exit) { ... });
//
// A child is either a command (argv, started with posix_spawn) or a function of this program run in a
// forked copy of it, with no exec (`body`): it starts warm, with what the parent loaded and parsed, and
// is isolated the same way (its own process, its own memory; a crash, a hang or a kill is its exit).
// Fork only from a process with one thread (ThisProcessHasOneThread): a lock another thread held at
// the fork would stay held in the child forever.
//
// Children's output goes to files, never pipes, so a chatty child cannot block on a full pipe.
// Error policy: a child that cannot be started is reported through ChildExit::spawn_error; nothing throws.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace oomguard {

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0] is the executable's path; ignored when body is set
  // Set: run in a forked child, whose exit code it returns (an exception that escapes it terminates the
  // child, as an uncaught exception ends a spawned one: SIGABRT, its what() on stderr). The child has the stop signals'
  // default actions, stdin /dev/null, stdout and stderr in the files below, and ends with _exit: the parent's atexit
  // handlers and static destructors never run in it.
  std::function<int()> body;
  std::string stdout_path;
  std::string stderr_path;
  double timeout_seconds = 300;
  // Note [Gangs of children]: specs with the same gang (>= 0), consecutive in the list, start together
  // and take one of max_running's places between them; when one of them ends otherwise than with exit
  // code 0, the others still running are killed after a short grace unless they end in it
  // (ChildExit::ended_with_gang). -1: alone.
  int64_t gang = -1;
};

struct ChildExit {
  std::string spawn_error;  // non-empty: it never ran
  bool timed_out = false;   // killed with SIGKILL at the timeout
  int exit_code = -1;       // when it exited normally
  int signal = 0;           // when a signal ended it
  int64_t max_rss_bytes = 0;  // its peak resident memory (getrusage's ru_maxrss), when it ran
  bool ended_with_gang = false;  // killed because another child of its gang failed (Note [Gangs of children])
  double wall_ms = 0;
};

// Starts the specs in order, keeping at most max_running alive, and calls on_done on this thread as
// each ends (in completion order; the index says which spec). While it runs, SIGINT, SIGTERM and
// SIGHUP stop it: the running children are killed and reaped, no more start, and the signal is
// returned (0 when every spec ran) for the caller to clean up and then die of it (RaiseDefault).
int RunChildren(const std::vector<ChildSpec>& specs, int max_running,
                const std::function<void(size_t index, const ChildExit& exit)>& on_done);

// Whether this process runs one thread now (Linux: /proc/self/task), so that a fork is safe.
bool ThisProcessHasOneThread();

// Ends the process with `signal` as its default action would (after a caller's clean-up).
[[noreturn]] void RaiseDefault(int signal);

// "signal 11 (Segmentation fault)", "exit code 3", "timed out after 300 s", or the spawn error.
std::string DescribeExit(const ChildExit& exit, double timeout_seconds);

}  // namespace oomguard
