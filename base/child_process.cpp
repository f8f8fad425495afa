#include "base/child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <thread>

extern char** environ;

namespace oomguard {
namespace {

using Clock = std::chrono::steady_clock;

struct Running {
  size_t index;
  pid_t pid;
  Clock::time_point start;
  double timeout_seconds;
  int64_t gang;
  bool killed = false;           // at its timeout
  bool ended_with_gang = false;  // killed because a sibling of its gang failed
  std::optional<Clock::time_point> end_at;  // a sibling failed: killed then unless it ends by itself
};

constexpr auto kGangGrace = std::chrono::seconds(2);  // Note [Gangs of children]

// Note [Gangs of children]
// A variant's real ranks (Note [Real ranks on cpu], workload/parallel/rank_group.h) wait for each other in
// their collectives, so they must run at once whatever --jobs says: a gang starts whole, and takes one
// place of max_running (a run at --jobs 1 still runs a world-4 variant's four ranks together). A rank
// that fails leaves its siblings waiting in a collective for a peer that is gone, so the first member
// to end otherwise than with exit code 0 (an error, a crash, a kill, its timeout) has the others killed
// here, rather than at gloo's timeout or theirs: after a grace of kGangGrace, in which a sibling that
// ends by itself is reaped as it ended. The grace is for the sibling that is itself the cause: two
// ranks end together (rank 1 writes its OOM and exits; rank 0's collective fails on the closed
// connection at once), and the runner may reap rank 0 first; killing rank 1 then would mark as "ended
// by the runner" the rank whose measurement names the failure (a CI run under load did exactly this).

// The places the running children take: one per lone child, one per gang.
int PlacesTaken(const std::vector<Running>& running) {
  int places = 0;
  for (size_t i = 0; i < running.size(); ++i) {
    bool counted = false;
    for (size_t j = 0; j < i && running[i].gang >= 0; ++j) counted = counted || running[j].gang == running[i].gang;
    places += counted ? 0 : 1;
  }
  return places;
}

// Has the running members of `gang` killed after the grace, unless they end first (Note [Gangs of children]).
void EndGang(std::vector<Running>& running, int64_t gang) {
  for (Running& r : running) {
    if (gang < 0 || r.gang != gang || r.end_at) continue;
    r.end_at = Clock::now() + kGangGrace;
  }
}

// In a forked child: stdin, stdout and stderr as a spawned child has them, or false.
bool RedirectStandardStreams(const ChildSpec& spec) {
  const int in = open("/dev/null", O_RDONLY);
  const int out = open(spec.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = open(spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (in < 0 || out < 0 || err < 0) return false;
  return dup2(in, STDIN_FILENO) >= 0 && dup2(out, STDOUT_FILENO) >= 0 && dup2(err, STDERR_FILENO) >= 0 &&
         close(in) == 0 && close(out) == 0 && close(err) == 0;
}

// The forked child's whole life: what exec would have reset, then the body, then _exit.
[[noreturn]] void RunBody(const ChildSpec& spec) {
  for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) std::signal(signal, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (!RedirectStandardStreams(spec)) _exit(127);  // as a command that cannot start
  int code = 0;
  try {
    code = spec.body();
  } catch (...) {
    // As in a spawned child: the exception's type and what() on stderr, then SIGABRT. It must not
    // unwind further, into the parent's stack that the fork copied.
    std::terminate();
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(code);
}

// Starts one child; returns 0 and sets *pid, or an errno value.
int Spawn(const ChildSpec& spec, pid_t* pid) {
  if (spec.body) {
    // What the parent buffered must not be written again by the child.
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    const pid_t child = fork();
    if (child < 0) return errno;
    if (child == 0) RunBody(spec);
    *pid = child;
    return 0;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, spec.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int rc = posix_spawn(pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc;
}

volatile std::sig_atomic_t g_stop_signal = 0;

void OnStopSignal(int signal) { g_stop_signal = signal; }

// The stop signals' handlers while children run; the previous ones come back on destruction.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = OnStopSignal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &action, &previous_[i]);
  }
  ~StopSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> previous_{};
};

}  // namespace

bool ThisProcessHasOneThread() {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return false;  // cannot tell: do not fork
  int count = 0;
  while (const dirent* entry = readdir(tasks)) count += entry->d_name[0] != '.';
  closedir(tasks);
  return count == 1;
}

void RaiseDefault(int signal) {
  std::signal(signal, SIG_DFL);
  std::raise(signal);
  std::_Exit(128 + signal);  // a signal that is blocked or ignored by the parent
}

int RunChildren(const std::vector<ChildSpec>& specs, int max_running,
                const std::function<void(size_t index, const ChildExit& exit)>& on_done) {
  const StopSignals stop_signals;
  std::vector<Running> running;
  size_t next = 0;
  while (next < specs.size() || !running.empty()) {
    if (const int signal = g_stop_signal; signal != 0) {
      for (const Running& r : running) kill(r.pid, SIGKILL);
      for (const Running& r : running) waitpid(r.pid, nullptr, 0);
      return signal;
    }
    while (next < specs.size() && PlacesTaken(running) < std::max(max_running, 1)) {
      const int64_t gang = specs[next].gang;
      bool gang_failed = false;
      do {  // a lone child, or the whole of its gang
        pid_t pid = 0;
        if (const int rc = Spawn(specs[next], &pid); rc != 0) {
          ChildExit exit;
          exit.spawn_error = std::string("could not start ") +
                             (specs[next].body ? "a forked child" : specs[next].argv[0]) + ": " + std::strerror(rc);
          exit.ended_with_gang = gang_failed;
          on_done(next++, exit);
          gang_failed = true;
          continue;
        }
        running.push_back({next, pid, Clock::now(), specs[next].timeout_seconds, gang});
        if (gang_failed) EndGang(running, gang);
        ++next;
      } while (gang >= 0 && next < specs.size() && specs[next].gang == gang);
      if (gang_failed) EndGang(running, gang);
    }
    bool reaped = false;
    for (size_t i = 0; i < running.size();) {
      Running& r = running[i];
      int status = 0;
      struct rusage usage {};
      const pid_t done = wait4(r.pid, &status, WNOHANG, &usage);
      const double elapsed = std::chrono::duration<double>(Clock::now() - r.start).count();
      if (done == 0) {
        if (!r.killed && elapsed > r.timeout_seconds) {
          kill(r.pid, SIGKILL);
          r.killed = true;
        } else if (!r.killed && !r.ended_with_gang && r.end_at && Clock::now() >= *r.end_at) {
          kill(r.pid, SIGKILL);
          r.ended_with_gang = true;
        }
        ++i;
        continue;
      }
      ChildExit exit;
      exit.wall_ms = elapsed * 1000;
      exit.timed_out = r.killed;
      exit.ended_with_gang = r.ended_with_gang;
      if (done > 0 && WIFEXITED(status)) exit.exit_code = WEXITSTATUS(status);
      if (done > 0 && WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
      if (done > 0) exit.max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
      const size_t index = r.index;
      const int64_t gang = r.gang;
      const bool failed = exit.timed_out || exit.signal != 0 || exit.exit_code != 0;
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      if (failed && !exit.ended_with_gang) EndGang(running, gang);
      on_done(index, exit);
      reaped = true;
    }
    if (!reaped && !running.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return 0;
}

std::string DescribeExit(const ChildExit& exit, double timeout_seconds) {
  if (!exit.spawn_error.empty()) return exit.spawn_error;
  if (exit.timed_out) return "timed out after " + std::to_string(static_cast<int>(timeout_seconds)) + " s";
  if (exit.signal != 0)
    return "crashed with signal " + std::to_string(exit.signal) + " (" + strsignal(exit.signal) + ")";
  return "exit code " + std::to_string(exit.exit_code);
}

}  // namespace oomguard
