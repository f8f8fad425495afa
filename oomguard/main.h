// oomguard's command line in your own executable: `run`, `list`, `explain`, `fit`, `compare` and
// `cards` over the workloads it registers (oomguard/workload.h), its scenario files and the built-in
// catalog, exactly as the `oomguard` tool serves them.
//
//   // my_memory_checks.cpp, linked with oomguard::oomguard
//   #include <oomguard/main.h>
//   #include <oomguard/workload.h>
//
//   OOMGUARD_WORKLOAD(mlp_adam) { ... }
//
//   int main(int argc, char** argv) {
//     return oomguard::Main(argc, argv, {.scenario_paths = {MY_SOURCE_DIR "/memory-scenarios"}});
//   }
//   // or, with no options:  OOMGUARD_MAIN()
//
//   $ ./my_memory_checks run --card t4 --report junit=memory.xml   # my scenarios
//   $ ./my_memory_checks run @catalog                              # the built-in catalog
//   $ ./my_memory_checks explain forgotten-no-grad
//
// Without paths on its command line a command uses `scenario_paths` (none: the built-in catalog); a
// name given to `explain` or `fit` is looked up there, then in the catalog. Exit codes: 0 success, 1
// failures found, 2 usage or input error. Main installs oomguard's tracking allocators first: call it
// before your program makes any tensor.
#pragma once

#include <string>
#include <vector>

// The installed package's catalog (its oomguardConfig.cmake defines this on oomguard::oomguard), so
// that a program built against an install finds share/oomguard/scenarios wherever it runs from.
#ifndef OOMGUARD_INSTALLED_CATALOG
#define OOMGUARD_INSTALLED_CATALOG ""
#endif

namespace oomguard {

struct MainOptions {
  // Scenario files or folders the commands use when none are named on the command line.
  std::vector<std::string> scenario_paths;
  // Where the built-in catalog is, when not beside the executable or in $OOMGUARD_CATALOG.
  std::string installed_catalog = OOMGUARD_INSTALLED_CATALOG;
};

// Serves the command line in argv (argv[0] is the program) and returns the exit code.
int Main(int argc, char** argv, const MainOptions& options = {});

// Ends the process with `code` once stdout and stderr are flushed, without the static destructors:
// LibTorch deregisters every operator at exit, about 0.2 s of a short command's 0.4 s on 2 cores.
// OOMGUARD_MAIN() ends so; a main of your own may too, when nothing of yours needs a destructor at
// exit (`oomguard::ExitNow(oomguard::Main(argc, argv, options));`). Under AddressSanitizer it exits
// normally, so that leaks are still reported.
[[noreturn]] void ExitNow(int code);

}  // namespace oomguard

// A main() that is oomguard::Main with no options.
#define OOMGUARD_MAIN() \
  int main(int argc, char** argv) { ::oomguard::ExitNow(::oomguard::Main(argc, argv)); }
