// A run killed from outside (D14 of issue 14): SIGKILL or SIGTERM to `oomguard run` while its children
// measure leaves no process behind, SIGTERM no scratch folder either, and the scratch folder a SIGKILL
// left is removed by the next run.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run/runner.h"
#include "tests/child_processes.h"
#include "tests/scoped_environment.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

using Clock = std::chrono::steady_clock;

// Long enough to be killed mid-run: a tiny model for many iterations.
constexpr const char* kSlowScenario = R"({
  "name": "slow",
  "summary": "a tiny model trained for a long time",
  "model": {"layers": [{"kind": "linear", "in": 4, "out": 8}, {"kind": "relu"}, {"kind": "linear", "in": 8, "out": 2}]},
  "data": {"batch": 3, "shape": [4], "on_host": false},
  "loop": {"iterations": 1000000, "loss": "mean", "optimizer": {"kind": "sgd"}},
  "variants": {"a": {}, "b": {}}
})";

using testing::ChildrenOf;  // forked warm, the measuring children have the run's command line

bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string fields;
  std::getline(stat, fields);
  // A zombie (state Z) has ended; its reaper is init once the parent is gone.
  return stat.good() && fields.find(") Z ") == std::string::npos;
}

// The scratch folders of `parent` in `tmp` (its TMPDIR).
std::vector<std::string> ScratchFoldersOf(pid_t parent, const std::string& tmp_folder) {
  std::vector<std::string> found;
  const std::string prefix = "oomguard-run-" + std::to_string(parent) + "-";
  DIR* tmp = opendir(tmp_folder.c_str());
  while (const dirent* entry = readdir(tmp)) {
    if (std::string(entry->d_name).rfind(prefix, 0) == 0) found.push_back(tmp_folder + "/" + entry->d_name);
  }
  closedir(tmp);
  return found;
}

template <typename Condition>
bool Within(std::chrono::milliseconds limit, Condition condition) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

class InterruptedRunTest : public ::testing::Test {
 protected:
  // Starts `oomguard run --jobs 2 slow.json` and waits for both of its children. The run has a TMPDIR
  // of its own: any other oomguard run on the machine (a parallel test) removes a killed run's scratch
  // folder from /tmp as soon as it starts, which is the point, but not what this test can then see.
  pid_t StartRun() {
    const std::string scenario = folder_.Write("slow.json", kSlowScenario);
    mkdir(tmp_.c_str(), 0755);
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("TMPDIR", tmp_.c_str(), 1);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
      execl(OOMGUARD_EXE, OOMGUARD_EXE, "run", "--jobs", "2", scenario.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    EXPECT_TRUE(Within(std::chrono::seconds(60), [&] { return ChildrenOf(pid).size() == 2; }));
    children_ = ChildrenOf(pid);
    return pid;
  }
  testing::ScratchFolder folder_{"interrupted"};
  const std::string tmp_ = folder_.path() + "/tmp";
  std::vector<pid_t> children_;
};

TEST_F(InterruptedRunTest, SigkillLeavesNoProcessAndTheNextRunRemovesTheScratchFolder) {
  const pid_t run = StartRun();
  ASSERT_EQ(children_.size(), 2u);
  kill(run, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(run, &status, 0), run);
  EXPECT_TRUE(Within(std::chrono::seconds(5), [&] { return !Alive(children_[0]) && !Alive(children_[1]); }));
  ASSERT_EQ(ScratchFoldersOf(run, tmp_).size(), 1u);  // nothing can clean up after SIGKILL, but the next run does
  RunOptions options;
  options.paths = {folder_.Write("tiny.json", R"({"name": "tiny", "summary": "s",
    "model": {"layers": [{"kind": "linear", "in": 4, "out": 2}]}, "data": {"batch": 1, "shape": [4]},
    "loop": {"iterations": 1, "loss": "mean"}, "variants": {"a": {}}})")};
  RunResults report;
  std::string error;
  testing::ScopedEnvironment env({"TMPDIR"});
  env.Set("TMPDIR", tmp_);
  ASSERT_TRUE(RunScenarios(options, OOMGUARD_EXE, nullptr, &report, &error)) << error;
  EXPECT_EQ(ScratchFoldersOf(run, tmp_), std::vector<std::string>{});
}

TEST_F(InterruptedRunTest, SigtermKillsTheChildrenRemovesTheScratchFolderAndEndsByTheSignal) {
  const pid_t run = StartRun();
  ASSERT_EQ(children_.size(), 2u);
  kill(run, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(run, &status, 0), run);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_FALSE(Alive(children_[0]));  // killed and reaped before the runner died
  EXPECT_FALSE(Alive(children_[1]));
  EXPECT_EQ(ScratchFoldersOf(run, tmp_), std::vector<std::string>{});
}

}  // namespace
}  // namespace oomguard
