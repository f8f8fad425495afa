// The live child processes of a process, and their command lines, read from /proc: what the tests of
// a run killed from outside look for (interrupted_run_test.cpp, real_ranks_kill_test.cpp).
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace oomguard::testing {

// The children of `parent` that have not ended (zombies left out).
inline std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  DIR* proc = opendir("/proc");
  while (const dirent* entry = readdir(proc)) {
    const std::string name = entry->d_name;
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in("/proc/" + name + "/stat");
    std::string stat;
    std::getline(in, stat);
    // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, so read after the last ')'.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (fields >> state >> ppid && ppid == parent && state != "Z")
      children.push_back(static_cast<pid_t>(std::stol(name)));
  }
  closedir(proc);
  return children;
}

// The command line `pid` was started with, an argument each.
inline std::vector<std::string> CommandLine(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  return args;
}

}  // namespace oomguard::testing
