// A real rank killed from outside (issue #34): SIGKILL to one rank's child while the ranks train ends
// the run in bounded time, its sibling ended by the runner rather than left waiting in a collective,
// and the variant names the rank (Note [A failing rank ends the variant], run/rank_children.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/child_processes.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

using Clock = std::chrono::steady_clock;

// Two ranks that train until they are stopped: a tiny model for many iterations.
constexpr const char* kEndless = R"({
  "name": "endless",
  "summary": "two real ranks training for a long time",
  "model": {"layers": [{"kind": "linear", "in": 16, "out": 16}, {"kind": "relu"}, {"kind": "linear", "in": 16, "out": 4}]},
  "data": {"batch": 4, "shape": [16]},
  "loop": {"iterations": 1000000, "loss": "mse", "optimizer": {"kind": "sgd"}},
  "parallel": {"world": 2, "strategy": "ddp"},
  "variants": {"a": {}}
})";

// The rank child of `parent` (its command line has --ranks-store; spawned children: OOMGUARD_SPAWN_CHILDREN)
// that is rank 1 (`--rank 1`), or the one that is not (rank 0, whose --rank is left out as 0 is).
pid_t RankChild(pid_t parent, bool rank1) {
  for (const pid_t child : testing::ChildrenOf(parent)) {
    const std::vector<std::string> args = testing::CommandLine(child);
    bool is_rank = false, is_rank1 = false;
    for (size_t k = 0; k + 1 < args.size(); ++k) {
      is_rank = is_rank || args[k] == "--ranks-store";
      is_rank1 = is_rank1 || (args[k] == "--rank" && args[k + 1] == "1");
    }
    if (is_rank && is_rank1 == rank1) return child;
  }
  return 0;
}

TEST(RealRanks, ARankKilledFromOutsideEndsTheRunInBoundedTimeWithThatRankNamed) {
  testing::ScratchFolder folder("real-ranks-kill");
  const std::string scenario = folder.Write("endless.json", kEndless);
  const std::string results = folder.path() + "/results.json";
  const pid_t run = fork();
  if (run == 0) {
    setenv("OOMGUARD_SPAWN_CHILDREN", "1", 1);  // so that each rank's command line says which it is
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execl(OOMGUARD_EXE, OOMGUARD_EXE, "run", "--backend", "cpu", "--json", results.c_str(), scenario.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t rank1 = 0, rank0 = 0;
  for (const auto deadline = Clock::now() + std::chrono::seconds(60); Clock::now() < deadline && !(rank1 && rank0);) {
    rank1 = RankChild(run, true);
    rank0 = RankChild(run, false);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(rank1, 0) << "rank 1's child never started";
  ASSERT_NE(rank0, 0) << "rank 0's child never started";
  std::this_thread::sleep_for(std::chrono::seconds(2));  // well into training, collectives under way
  const auto killed_at = Clock::now();
  kill(rank1, SIGKILL);
  int status = 0;
  pid_t done = 0;
  while (Clock::now() - killed_at < std::chrono::seconds(20) && (done = waitpid(run, &status, WNOHANG)) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (done == 0) {
    kill(run, SIGKILL);
    waitpid(run, &status, 0);
    FAIL() << "the run did not end within 20 s of rank 1's kill";
  }
  // Well inside gloo's own timeout (30 s): the runner ended rank 0 as soon as rank 1 was gone.
  EXPECT_LT(Clock::now() - killed_at, std::chrono::seconds(10));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);  // the variant failed
  EXPECT_NE(kill(rank0, 0), 0);       // rank 0 is gone (reaped by the runner)
  std::ifstream in(results);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("rank 1 of 2: crashed with signal 9 (Killed): killed by SIGKILL from outside oomguard"),
            std::string::npos)
      << text.str().substr(0, 3000);
  // Rank 0 ends by itself on the closed connection, within the runner's grace, or is ended by the runner
  // after it (Note [Gangs of children], base/child_process.cpp): either way it is said.
  EXPECT_TRUE(text.str().find("(the runner ended rank 0)") != std::string::npos ||
              text.str().find("(rank 0 stopped in a collective without it)") != std::string::npos)
      << text.str().substr(0, 3000);
}

}  // namespace
}  // namespace oomguard
