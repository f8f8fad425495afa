// `oomguard fit ...` run through the CLI in this process, for the fit tests: its exit code, stdout and
// stderr, and the --json file it wrote.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
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

// `args` after "oomguard fit".
inline CliResult FitCli(std::vector<std::string> args) {
  args.insert(args.begin(), {"oomguard", "fit"});
  std::ostringstream out, err;
  const int code = RunCli(args, out, err);
  return {code, out.str(), err.str()};
}

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace oomguard::testing
