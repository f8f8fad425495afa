#include <iostream>

#include "allocators/install.h"
#include "cli/cli.h"

int main(int argc, char** argv) {
  // Before any tensor exists: Note [Install before the first tensor] (allocators/install.h).
  oomguard::InstallTrackingAllocators();
  return oomguard::RunCli(std::vector<std::string>(argv, argv + argc), std::cout, std::cerr);
}
