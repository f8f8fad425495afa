// The CLI run in this process, as a test drives it: exit code, stdout and stderr, and reading the
// files a command wrote.
//
//   const CliResult r = testing::Cli({"run", "--json", path});
//   EXPECT_EQ(r.code, kExitOk) << r.err;
#pragma once

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace oomguard::testing {

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

// `args` without the program name.
inline CliResult Cli(std::vector<std::string> args) {
  args.insert(args.begin(), "oomguard");
  std::ostringstream out, err;
  const int code = RunCli(args, out, err);
  return {code, out.str(), err.str()};
}

inline std::string Contents(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

inline bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

}  // namespace oomguard::testing
