// The test binary installs oomguard's allocators first, as the real CLI does, so every test sees
// c10 configured the way users run it.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "allocators/install.h"

namespace {

// GoogleTest has dealt this binary's tests by its sharding variables before an environment is set up.
// Removing them then keeps the `oomguard run` that tests call in process (which honours the same
// variables) from taking a shard of its own scenarios when a runner shards this binary.
class ForgetShardingVariables : public testing::Environment {
 public:
  void SetUp() override {
    for (const char* name : {"GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX", "GTEST_SHARD_STATUS_FILE"}) unsetenv(name);
  }
};

}  // namespace

int main(int argc, char** argv) {
  oomguard::InstallTrackingAllocators();
  // One intra-op thread, as the runner's children run (run/measure_child.cpp): the bytes tests assert
  // in process are then the children's, and CTest's parallel tests do not oversubscribe the cores.
  // Under other load, OpenMP's spinning workers cost a whole-catalog test 4x its CPU time with two.
  at::set_num_threads(1);
  testing::InitGoogleTest(&argc, argv);
  testing::AddGlobalTestEnvironment(new ForgetShardingVariables);  // GoogleTest owns it
  return RUN_ALL_TESTS();
}
