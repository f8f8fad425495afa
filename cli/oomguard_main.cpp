// oomguard::Main (oomguard/main.h): the `oomguard` tool's main, and a user program's.
#include <cstdio>
#include <cstdlib>
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

// Leak reports need the normal exit (LeakSanitizer runs from an atexit handler).
#if defined(__SANITIZE_ADDRESS__)
#define OOMGUARD_NORMAL_EXIT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OOMGUARD_NORMAL_EXIT 1
#endif
#endif

void ExitNow(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
#ifdef OOMGUARD_NORMAL_EXIT
  std::exit(code);
#else
  std::_Exit(code);
#endif
}

}  // namespace oomguard
