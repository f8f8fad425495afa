// oomguard::Main (oomguard/main.h): the `oomguard` tool's main, and a user program's.
#include <iostream>
#include <string>
#include <vector>

#include "allocators/install.h"
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

}  // namespace oomguard
