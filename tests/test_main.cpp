// The test binary installs oomguard's allocators first, as the real CLI does, so every test sees
// c10 configured the way users run it.
#include <gtest/gtest.h>

#include "allocators/install.h"

int main(int argc, char** argv) {
  oomguard::InstallTrackingAllocators();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
