#include "cli/program_name.h"

namespace oomguard {
namespace {

std::string& Name() {
  static std::string name = "oomguard";
  return name;
}

}  // namespace

void SetProgramName(std::string_view argv0) {
  const size_t slash = argv0.find_last_of('/');
  const std::string_view base = slash == std::string_view::npos ? argv0 : argv0.substr(slash + 1);
  if (!base.empty()) Name() = std::string(base);
}

const std::string& ProgramName() { return Name(); }

std::string CommandPrefix(std::string_view command) { return Name() + " " + std::string(command) + ": "; }

}  // namespace oomguard
