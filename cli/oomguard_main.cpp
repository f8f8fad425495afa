// oomguard::Main (oomguard/main.h): the `oomguard` tool's main, and a user program's.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "allocators/install.h"
#include "base/sanitizers.h"
#include "cli/cli.h"
#include "oomguard/main.h"
#include "scenario/catalog.h"

namespace oomguard {

int Main(int argc, char** argv, const MainOptions& options) {
  // Before any tensor exists: Note [Install before the first tensor] (allocators/install.h).
  InstallTrackingAllocators();
  SetInstalledCatalog(options.installed_catalog);
  SetDefaultScenarioPaths(options.scenario_paths);
  return RunCli(std::vector<std::string>(argv, argv + argc), std::cout, std::cerr);
}

void ExitNow(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  // Leak reports need the normal exit (LeakSanitizer runs from an atexit handler).
  if (kUnderAddressSanitizer) std::exit(code);
  std::_Exit(code);
}

}  // namespace oomguard
