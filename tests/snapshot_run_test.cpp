// `oomguard run --snapshot-dir`: which variants get a snapshot, where it goes, what the console says,
// and a folder that cannot be made. tests/check_memory_viz_snapshot.py opens the same kind of file
// with PyTorch's own memory_viz code.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "cli/cli.h"
#include "tests/pickle_reader.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

// Parameters 232 bytes (4x8 + 8 and 8x2 + 2 floats), the batch 48 (3x4 floats): the first layer's
// 96-byte output does not fit under a 300-byte cap, with 280 bytes live and 20 free.
constexpr const char* kOomScenario = R"({
  "name": "tiny-oom",
  "summary": "a tiny model whose first activation does not fit",
  "backends": ["cpu", "meta"],
  "model": {"layers": [{"kind": "linear", "in": 4, "out": 8}, {"kind": "relu"}, {"kind": "linear", "in": 8, "out": 2}]},
  "data": {"batch": 3, "shape": [4], "on_host": false},
  "loop": {"iterations": 1, "loss": "mean", "optimizer": {"kind": "sgd"}},
  "variants": {"base": {}},
  "expect": {"base": {"outcome": "oom"}}
})";

class SnapshotRunTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("OOMGUARD_SELF", OOMGUARD_EXE, 1); }
  void TearDown() override { unsetenv("OOMGUARD_SELF"); }

  struct Result {
    int code;
    std::string out, err;
  };
  Result Run(std::vector<std::string> args) { return RunFile(scenario_, std::move(args)); }
  Result RunFile(const std::string& scenario, std::vector<std::string> args) {
    args.insert(args.begin(), {"oomguard", "run", scenario});
    std::ostringstream out, err;
    const int code = RunCli(args, out, err);
    return {code, out.str(), err.str()};
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static bool Exists(const std::string& path) {
    struct stat info;
    return stat(path.c_str(), &info) == 0;
  }

  testing::ScratchFolder folder_{"snapshot"};
  const std::string scenario_ = folder_.Write("tiny-oom.json", kOomScenario);
};

TEST_F(SnapshotRunTest, AnOomVariantGetsASnapshotInAFolderMadeForIt) {
  const std::string dir = folder_.path() + "/snaps/nested";
  // On the tensors' bytes: under the default verdict 300 B holds no 2 MiB segment, and the first
  // allocation would be the OOM.
  const Result r = Run({"--cap", "300B", "--snapshot-dir", dir, "--verdict", "allocated"});
  EXPECT_EQ(r.code, kExitOk) << r.out << r.err;
  const std::string path = dir + "/tiny-oom.base.cpu.pickle";
  EXPECT_NE(r.out.find("              snapshot: " + path + " (open it in https://pytorch.org/memory_viz)\n"),
            std::string::npos)
      << r.out;
  const std::string text = testing::RenderPickle(Read(path));
  EXPECT_NE(text.find("{'action': 'oom', 'device_free': 20, 'size': 96, 'stream': 0"), std::string::npos) << text;
  EXPECT_NE(text.find("'name': 'the forward of layer 0:linear'}, {'filename': '" + scenario_ +
                      "', 'line': 0, 'name': 'phase forward'}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("'oomguard': {'scenario': 'tiny-oom', 'variant': 'base', 'backend': 'cpu', 'cap_bytes': 300, "
                      "'dropped_events': 0}"),
            std::string::npos)
      << text;
}

TEST_F(SnapshotRunTest, AVariantThatFailsItsExpectationGetsOneWithoutAnOom) {
  // Uncapped, it fits: not the OOM the scenario expects. Only the parent knows that verdict.
  const std::string dir = folder_.path() + "/snaps";
  const Result r = Run({"--snapshot-dir", dir, "--backend", "meta"});
  EXPECT_EQ(r.code, kExitFailures);
  EXPECT_NE(r.out.find("              snapshot: " + dir + "/tiny-oom.base.meta.pickle"), std::string::npos) << r.out;
  const std::string text = testing::RenderPickle(Read(dir + "/tiny-oom.base.meta.pickle"));
  EXPECT_EQ(text.find("'action': 'oom'"), std::string::npos);
  EXPECT_NE(text.find("'backend': 'meta'"), std::string::npos) << text;
}

TEST_F(SnapshotRunTest, PassingVariantsGetOneOnlyWithSnapshotAll) {
  std::string passing = kOomScenario;
  passing.replace(passing.find(R"("expect")"), std::string(R"("expect": {"base": {"outcome": "oom"}})").size(),
                  R"("expect": {})");
  const std::string scenario = folder_.Write("tiny-fits.json", passing);
  const std::string dir = folder_.path() + "/snaps";
  Result r = RunFile(scenario, {"--snapshot-dir", dir, "--backend", "meta"});
  EXPECT_EQ(r.code, kExitOk) << r.out << r.err;
  EXPECT_EQ(r.out.find("snapshot:"), std::string::npos) << r.out;
  EXPECT_FALSE(Exists(dir + "/tiny-oom.base.meta.pickle"));
  r = RunFile(scenario, {"--snapshot-dir", dir, "--backend", "meta", "--snapshot-all"});
  EXPECT_EQ(r.code, kExitOk) << r.out << r.err;
  EXPECT_TRUE(Exists(dir + "/tiny-oom.base.meta.pickle")) << r.out << r.err;
}

TEST_F(SnapshotRunTest, AFolderThatCannotBeMadeIsAUsageError) {
  const std::string file = folder_.Write("plain-file", "x");
  const Result r = Run({"--snapshot-dir", file + "/snaps"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err, "oomguard run: --snapshot-dir " + file + "/snaps: " + file + " is not a folder\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(SnapshotRunTest, SnapshotAllWithoutAFolderIsAUsageError) {
  const Result r = Run({"--snapshot-all"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err.rfind("--snapshot-all requires --snapshot-dir", 0), 0u) << r.err;
}

}  // namespace
}  // namespace oomguard
