// A rank's collectives return a completed Work with a future (Note [A completed Work's future],
// workload/parallel/rank_group.cpp): work->getFuture()->wait() returns at once, and its value is the
// collective's outputs, the caller's own tensors, as ProcessGroupGloo's futures hold them. On the fake
// group (meta, and a workload's ctx.ProcessGroup() anywhere but real ranks) and on two real Gloo ranks,
// forked from this test, each joining the other through a FileStore.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <oomguard/measure.h>
#include <oomguard/workload.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <vector>

#include "tests/scratch_folder.h"
#include "workload/parallel/rank_group.h"

namespace oomguard {
namespace {

// What an all-reduce's, an all-gather's and a barrier's futures hold, on `group` as rank `rank` of 2,
// whose tensors are on `device`; empty when all is as Gloo's futures say, else the first difference.
std::string CheckFutures(c10d::Backend& group, int64_t rank, c10::Device device, bool moves_data) {
  const at::TensorOptions options = at::TensorOptions().device(device);
  std::vector<at::Tensor> summed{at::full({4}, static_cast<double>(rank + 1), options)};
  const c10::intrusive_ptr<c10d::Work> work = group.allreduce(summed);
  const c10::intrusive_ptr<c10::ivalue::Future> future = work->getFuture();
  future->wait();
  if (!future->completed() || future->hasError()) return "the all-reduce's future is not completed without error";
  const std::vector<at::Tensor> value = future->value().toTensorVector();
  if (value.size() != 1 || !value[0].is_same(summed[0])) return "the all-reduce's future does not hold its tensor";
  if (work->result().size() != 1 || !work->result()[0].is_same(summed[0])) return "result() is not the tensor";
  if (moves_data && !at::equal(summed[0], at::full({4}, 3.0))) return "the all-reduce did not sum 1 and 2";

  std::vector<at::Tensor> mine{at::full({2}, static_cast<double>(rank), options)};
  std::vector<std::vector<at::Tensor>> gathered{{at::empty({2}, options), at::empty({2}, options)}};
  const c10::intrusive_ptr<c10::ivalue::Future> all = group.allgather(gathered, mine)->getFuture();
  all->wait();
  const std::vector<at::Tensor> parts = all->value().toTensorVector();
  if (parts.size() != 2 || !parts[0].is_same(gathered[0][0]) || !parts[1].is_same(gathered[0][1])) {
    return "the all-gather's future does not hold its one output list";
  }
  if (moves_data && !(at::equal(parts[0], at::zeros({2})) && at::equal(parts[1], at::ones({2})))) {
    return "the all-gather did not gather rank 0's zeros and rank 1's ones";
  }
  const c10::intrusive_ptr<c10::ivalue::Future> barrier = group.barrier()->getFuture();
  barrier->wait();
  if (!barrier->value().toTensorVector().empty()) return "the barrier's future is not an empty list";
  return "";
}

TEST(WorkFuture, TheFakeGroupsWorkHasACompletedFutureHoldingTheOutputs) {
  for (int64_t rank : {0, 1}) {
    const c10::intrusive_ptr<c10d::Backend> group = MakeRankGroup(ParallelSpec{.world = 2, .rank = rank}, c10::kMeta);
    EXPECT_EQ(group->getBackendName(), "fake");
    EXPECT_EQ(CheckFutures(*group, rank, c10::Device(c10::kMeta), /*moves_data=*/false), "") << rank;
  }
}

// A workload's code as a user writes it, on meta: the future costs no byte (the peak is the tensor's).
TEST(WorkFuture, AWorkloadWaitsOnTheFutureOfItsAllReduce) {
  int64_t held = -1;
  MeasureOptions options;
  options.backend = "meta";
  options.world = 4;
  options.rank = 3;
  const Measurement m = Measure(
      [&](Context& ctx) {
        for ([[maybe_unused]] int64_t iteration : ctx.Iterations()) {
          std::vector<at::Tensor> grads{at::ones({256}, ctx.options())};
          const c10::intrusive_ptr<c10::ivalue::Future> future = ctx.ProcessGroup()->allreduce(grads)->getFuture();
          future->wait();
          held = static_cast<int64_t>(future->value().toTensorVector().size());
        }
      },
      options);
  ASSERT_EQ(m.outcome, "pass") << m.error;
  EXPECT_EQ(held, 1);
  EXPECT_EQ(m.peak_bytes, 256 * 4);
}

// Two real ranks: each a child of this test that joins gloo and checks its futures; exit 0 when all holds.
TEST(WorkFuture, RealGlooRanksWorkHasACompletedFutureHoldingTheOutputs) {
  testing::ScratchFolder folder("work-future");
  const std::string store = folder.path() + "/store";
  std::vector<pid_t> ranks;
  for (int64_t rank : {0, 1}) {
    const pid_t child = fork();
    if (child == 0) {
      JoinRealRanks({store, 2, rank, std::chrono::seconds(20)});
      const c10::intrusive_ptr<c10d::Backend> group = MakeRankGroup(ParallelSpec{.world = 2, .rank = rank}, c10::kCPU);
      const std::string problem = group->getBackendName() != "gloo"
                                      ? "not gloo"
                                      : CheckFutures(*group, rank, c10::Device(c10::kCPU), /*moves_data=*/true);
      if (!problem.empty()) fprintf(stderr, "rank %d: %s\n", static_cast<int>(rank), problem.c_str());
      _exit(problem.empty() ? 0 : 1);
    }
    ranks.push_back(child);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (size_t r = 0; r < ranks.size(); ++r) {
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(ranks[r], &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (done == 0) {
      for (const pid_t p : ranks) kill(p, SIGKILL);
      for (const pid_t p : ranks) waitpid(p, &status, 0);
      FAIL() << "rank " << r << " did not end within 60 s";
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << ": status " << status;
  }
}

}  // namespace
}  // namespace oomguard
