// The model of the CUDA caching allocator in `oomguard run`: by default it decides, on reserved bytes
// (--verdict reserved); with --verdict allocated the ledger decides and --model-cuda adds the
// model's prediction.
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

// A 2.73 MiB weight (4 x 179200 floats) in a 20 MiB large-pool segment, and 700 KiB tensors (the bias,
// the linear's and the relus' outputs, their gradients) in 2 MiB small-pool segments, two to a segment.
constexpr const char* kFragmentingScenario = R"({
  "name": "fragmenting",
  "summary": "700 KiB activations",
  "backends": ["cpu", "meta"],
  "model": {"layers": [{"kind": "linear", "in": 4, "out": 179200}, {"kind": "relu"}, {"kind": "relu"}]},
  "data": {"batch": 1, "shape": [4], "on_host": false},
  "loop": {"iterations": 1, "loss": "mean", "optimizer": {"kind": "sgd"}},
  "variants": {"base": {}}
})";

class ModelCudaRunTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("OOMGUARD_SELF", OOMGUARD_EXE, 1); }
  void TearDown() override { unsetenv("OOMGUARD_SELF"); }

  std::string Run(std::vector<std::string> args, int code = 0, std::string* err_text = nullptr,
                  const std::string& scenario = "") {
    args.insert(args.begin(), {"oomguard", "run", scenario.empty() ? scenario_ : scenario, "--backend", "meta"});
    std::ostringstream out, err;
    EXPECT_EQ(RunCli(args, out, err), code) << out.str() << err.str();
    if (err_text != nullptr) *err_text = err.str();
    return out.str();
  }

  testing::ScratchFolder folder_{"model-cuda"};
  const std::string scenario_ = folder_.Write("tiny.json", kTinyScenario);
};

TEST_F(ModelCudaRunTest, TheConsoleShowsThePrediction) {
  // 13 tensors of under 512 bytes live at the peak: 13 blocks of 512 B in one 2 MiB segment.
  const std::string out = Run({"--cap", "1GiB", "--verdict", "allocated", "--model-cuda"});
  EXPECT_NE(out.find("\n              cuda model: allocated 6.50 KiB, reserved 2.00 MiB (fragmentation 1.99 MiB), "
                     "0 retries, 0 OOMs predicted\n"),
            std::string::npos)
      << out;
}

TEST_F(ModelCudaRunTest, TheVerdictIsOnReservedBytesByDefault) {
  const std::string out = Run({"--cap", "1GiB"});
  EXPECT_NE(out.find("\n              cuda model: allocated 6.50 KiB, reserved 2.00 MiB (fragmentation 1.99 MiB), "
                     "0 retries, 0 OOMs; the verdict is on reserved bytes\n"),
            std::string::npos)
      << out;
}

TEST_F(ModelCudaRunTest, ACapBelowOneSegmentPassesTheLedgerButPredictsOoms) {
  // 1 MiB holds the tiny model's bytes, but not the 2 MiB segment the caching allocator would need.
  // Each of the run's 17 requests needs a segment the cap refuses: released cache, retried, refused.
  const std::string out = Run({"--cap", "1MiB", "--verdict", "allocated", "--model-cuda"});
  EXPECT_NE(out.find("\n              cuda model: allocated 0 bytes, reserved 0 bytes (fragmentation 0 bytes), "
                     "17 retries, 17 OOMs predicted\n"),
            std::string::npos)
      << out;
}

TEST_F(ModelCudaRunTest, ACapBelowOneSegmentIsAnOomOnReservedBytes) {
  // The same cap under the default verdict: the first request (the first layer's 128-byte weight)
  // needs a 2 MiB small-pool segment, 0 + 2 MiB > 1 MiB, and there is no cache to release.
  const std::string out = Run({"--cap", "1MiB"}, 1);
  EXPECT_NE(out.find("META out of memory (oomguard cap on reserved bytes, as on the GPU). Tried to allocate 128 bytes. "
                     "PyTorch's caching allocator: reserved 0 bytes (allocated 0 bytes) + a 2.00 MiB segment would "
                     "pass the cap 1024.00 KiB (1048576 bytes), even after releasing its cache. 0 bytes is live in "
                     "tensors."),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("cuda model: allocated 0 bytes, reserved 0 bytes (fragmentation 0 bytes), 1 retry, 1 OOM; the "
                     "verdict is on reserved bytes\n"),
            std::string::npos)
      << out;
}

// One run answers "would expandable segments make it fit?". At a 25 MiB cap the tensors' 8.20 MiB peak
// fits, but in backward, with 5.47 MiB live, the small pool needs a third 2 MiB segment next to the 20
// MiB one and two of its own (the model's numbers; reserved_verdict_test.cpp derives the same kind of
// case by hand). Expandable segments map the small pool as one range of 2 MiB pages, and its blocks
// fit in two: reserved 24 MiB, which fits.
TEST_F(ModelCudaRunTest, ExpandableSegmentsAnswerInOneRun) {
  const std::string fragmenting = folder_.Write("fragmenting.json", kFragmentingScenario);
  const std::string oom = Run({"--cap", "25MiB"}, 1, nullptr, fragmenting);
  EXPECT_NE(oom.find("PyTorch's caching allocator: reserved 24.00 MiB (allocated 5.47 MiB) + a 2.00 MiB segment "
                     "would pass the cap 25.00 MiB (26214400 bytes), even after releasing its cache. 5.47 MiB is live "
                     "in tensors."),
            std::string::npos)
      << oom;
  const std::string fits = Run({"--cap", "25MiB", "--alloc-conf", "expandable_segments:True"}, 0, nullptr, fragmenting);
  EXPECT_NE(fits.find("base  PASS        pass  peak 8.20 MiB"), std::string::npos) << fits;
  EXPECT_NE(fits.find("cuda model: allocated 8.20 MiB, reserved 24.00 MiB (fragmentation 15.80 MiB), 0 retries, 0 "
                      "OOMs; the verdict is on reserved bytes"),
            std::string::npos)
      << fits;
  EXPECT_EQ(Run({"--cap", "25MiB", "--verdict", "allocated"}, 0, nullptr, fragmenting).find("cuda model:"),
            std::string::npos);  // the old verdict: the tensors' bytes fit
}

TEST_F(ModelCudaRunTest, NoModelUnderTheAllocatedVerdictWithoutTheFlag) {
  EXPECT_EQ(Run({"--cap", "1MiB", "--verdict", "allocated"}).find("cuda model:"), std::string::npos);
}

TEST_F(ModelCudaRunTest, TheAllocatorConfigReachesTheModel) {
  // Expandable segments map the small pool in 2 MiB pages: the same 2 MiB for the tiny model. The key
  // the model does not follow is a warning.
  const std::string out = Run({"--cap", "1GiB", "--alloc-conf", "expandable_segments:True,release_lock_on_cudamalloc:True"});
  EXPECT_NE(out.find("reserved 2.00 MiB (fragmentation 1.99 MiB), 0 retries, 0 OOMs; the verdict is on reserved bytes"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("the allocator config sets release_lock_on_cudamalloc, which the model of the CUDA caching "
                     "allocator ignores"),
            std::string::npos)
      << out;
}

TEST_F(ModelCudaRunTest, ABadAllocatorConfigIsAUsageError) {
  std::string err;
  Run({"--alloc-conf", "bogus:1"}, 2, &err);
  EXPECT_EQ(err,
            "oomguard run: --alloc-conf: unrecognized key 'bogus' in the allocator config (PyTorch: \"Unrecognized key "
            "'bogus' in CUDA allocator config.\")\n");
}

TEST_F(ModelCudaRunTest, ABadAllocatorConfigInTheEnvironmentNamesIt) {
  setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:1", 1);
  std::string err;
  Run({}, 2, &err);
  unsetenv("PYTORCH_ALLOC_CONF");
  EXPECT_EQ(err.rfind("oomguard run: PYTORCH_ALLOC_CONF (from the environment): max_split_size_mb too small", 0), 0u)
      << err;
}

}  // namespace
}  // namespace oomguard
