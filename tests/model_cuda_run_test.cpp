// `oomguard run --model-cuda`: the child feeds a CachingAllocatorModel and the console shows its
// prediction; without the flag nothing changes.
#include <gtest/gtest.h>

#include <sstream>

#include "cli/cli.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

// Every tensor is under 1 KiB: the model puts them all in one 2 MiB small-pool segment.
constexpr const char* kTinyScenario = R"({
  "name": "tiny",
  "summary": "a tiny model",
  "backends": ["cpu", "meta"],
  "model": {"layers": [{"kind": "linear", "in": 4, "out": 8}, {"kind": "relu"}, {"kind": "linear", "in": 8, "out": 2}]},
  "data": {"batch": 3, "shape": [4], "on_host": false},
  "loop": {"iterations": 1, "loss": "mean", "optimizer": {"kind": "sgd"}},
  "variants": {"base": {}}
})";

class ModelCudaRunTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("OOMGUARD_SELF", OOMGUARD_EXE, 1); }
  void TearDown() override { unsetenv("OOMGUARD_SELF"); }

  std::string Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"oomguard", "run", scenario_, "--backend", "meta"});
    std::ostringstream out, err;
    EXPECT_EQ(RunCli(args, out, err), 0) << out.str() << err.str();
    return out.str();
  }

  testing::ScratchFolder folder_{"model-cuda"};
  const std::string scenario_ = folder_.Write("tiny.json", kTinyScenario);
};

TEST_F(ModelCudaRunTest, TheConsoleShowsThePrediction) {
  // 13 tensors of under 512 bytes live at the peak: 13 blocks of 512 B in one 2 MiB segment.
  const std::string out = Run({"--cap", "1GiB", "--model-cuda"});
  EXPECT_NE(out.find("\n              cuda model: allocated 6.50 KiB, reserved 2.00 MiB (fragmentation 1.99 MiB), "
                     "0 retries, 0 OOMs predicted\n"),
            std::string::npos)
      << out;
}

TEST_F(ModelCudaRunTest, ACapBelowOneSegmentPassesTheLedgerButPredictsOoms) {
  // 1 MiB holds the tiny model's bytes, but not the 2 MiB segment the caching allocator would need.
  // Each of the run's 17 requests needs a segment the cap refuses: released cache, retried, refused.
  const std::string out = Run({"--cap", "1MiB", "--model-cuda"});
  EXPECT_NE(out.find("\n              cuda model: allocated 0 bytes, reserved 0 bytes (fragmentation 0 bytes), "
                     "17 retries, 17 OOMs predicted\n"),
            std::string::npos)
      << out;
}

TEST_F(ModelCudaRunTest, NoPredictionWithoutTheFlag) {
  EXPECT_EQ(Run({"--cap", "1GiB"}).find("cuda model:"), std::string::npos);
}

}  // namespace
}  // namespace oomguard
