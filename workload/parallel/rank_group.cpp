#include "workload/parallel/rank_group.h"

// Note [ProcessGroupGloo without gloo's headers] (workload/parallel/c10d_shim/gloo/context.h): the wheel's
// libtorch_cpu is built with gloo; its header compiles only with this defined.
#define USE_C10D_GLOO 1

#include <ATen/record_function.h>

#include <chrono>
#include <optional>
#include <thread>
#include <vector>
#include <torch/csrc/distributed/c10d/FakeProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "allocators/cpu_tracking_allocator.h"
#include "base/check.h"
#ifdef OOMGUARD_WITH_CUDA
#include "allocators/cuda/nccl_group.h"
#endif

namespace oomguard {
namespace {

// Waits for the rank's current CUDA stream, on its own GPU (the cuda session made it current).
void SynchronizeCurrentStream() {
#ifdef OOMGUARD_WITH_CUDA
  SynchronizeCurrentCudaStream();
#else
  OOMGUARD_CHECK(false) << "this build has no cuda backend";
#endif
}

// Note [Gloo's buffers are host memory]
// Gloo runs a collective on its worker thread, and some of them stage the data in tensors of their
// own: an all-gather (the ZeRO strategies' _allgather_base after the step) gathers into a flat tensor
// of world x the input's elements and then copies it into the outputs, one whole parameter buffer more
// (zero2 at world 8: the optimizer phase's peak 12.01 MiB higher than the fake group's, and 2
// allocations per step more). NCCL on a GPU gathers into the output itself, so those bytes are not
// what a card would hold; they are Gloo's host memory, as a wrapped number's copy is (Note [Host
// scalars], backends/host_scalars.h). Every collective therefore goes through CompletedCollectives, which
// waits for it inside a ProcessHostAllocationScope: what any thread allocates while the rank waits for
// its collective (the rank itself only waits) is booked as host memory, out of the ledger. Its copies
// out of that staging, ops of Gloo's own, are not watched either (a copy from a host block would count
// as a host-to-device transfer: 8 per step at world 8): the collective is issued with RecordFunction
// off, and Gloo's worker runs it under the thread-local state captured then. The collectives are
// synchronous (data_parallel.cpp, fully_sharded.cpp and a workload's own code get a completed Work,
// whose future holds the outputs: Note [A completed Work's future]), and a collective returns only
// once Gloo's worker has let go of its work: the work holds the collective's tensors (zero2's reduce
// holds views of the bucket's staging), and a worker that dropped it after the rank had freed its own
// references would free the staging on its thread, later, at a time that varies from run to run
// (seen: the staging's 16.79 MiB still live after backward on one rank in a few runs).
//
// Note [A completed Work's future]
// c10d's Works hand out a future that completes with the collective's outputs (ProcessGroupGloo's
// AsyncWork: the output tensors; a list of lists where there are several output lists; an empty list
// for a barrier), and code reads it: a comm hook returns it and DDP's parses its value, a user's code
// calls work->getFuture()->wait() or then(). A rank's collective here returns a Work already done
// (Note [Gloo's buffers are host memory]), whose future is made completed with the caller's outputs:
// no copy, no allocation, the tensors the caller holds anyway (held until the Work is dropped, as
// Gloo's are). LibTorch's FakeWork completes its future with None, which a hook cannot parse; the fake
// group here (FakeGroup) returns the same completed Work for the collectives Gloo's wrapper forwards,
// so code that reads the value runs alike on meta and on real ranks (tests/work_future_test.cpp). Its
// other collectives keep FakeWork.
class Done final : public c10d::Work {
 public:
  explicit Done(const std::vector<std::vector<at::Tensor>>& outputs) : outputs_(outputs) {
    if (outputs.size() > 1) {
      future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::ListType::ofTensors()));
      future_->markCompleted(c10::IValue(outputs));
      return;
    }
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
    future_->markCompleted(c10::IValue(outputs.empty() ? std::vector<at::Tensor>() : outputs[0]));
  }
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  // A collective already waited for: wait() returns at once, as a completed Work's does.
  bool wait(std::chrono::milliseconds /*timeout*/) override { return true; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // As Gloo's: the one output list (empty for a barrier); several lists only through the future.
  std::vector<at::Tensor> result() override {
    TORCH_CHECK(outputs_.size() <= 1, "work result does not support list of lists, use .getFuture() and value()");
    return outputs_.empty() ? std::vector<at::Tensor>() : outputs_[0];
  }

 private:
  std::vector<std::vector<at::Tensor>> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The fake group, its Works given futures with their outputs (Note [A completed Work's future]).
class FakeGroup final : public c10d::FakeProcessGroup {
 public:
  FakeGroup(int rank, int world) : FakeProcessGroup(rank, world, c10::make_intrusive<Options>()) {}

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& t, const c10d::BroadcastOptions& o) override {
    FakeProcessGroup::broadcast(t, o);
    return c10::make_intrusive<Done>(std::vector<std::vector<at::Tensor>>{t});
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) override {
    FakeProcessGroup::allreduce(t, o);
    return c10::make_intrusive<Done>(std::vector<std::vector<at::Tensor>>{t});
  }
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& t, const c10d::ReduceOptions& o) override {
    FakeProcessGroup::reduce(t, o);
    return c10::make_intrusive<Done>(std::vector<std::vector<at::Tensor>>{t});
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                           const c10d::AllgatherOptions& o) override {
    FakeProcessGroup::allgather(out, in, o);
    return c10::make_intrusive<Done>(out);
  }
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& o) override {
    FakeProcessGroup::_allgather_base(out, in, o);
    return c10::make_intrusive<Done>(std::vector<std::vector<at::Tensor>>{{out}});
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
                                                const c10d::ReduceScatterOptions& o) override {
    FakeProcessGroup::reduce_scatter(out, in, o);
    return c10::make_intrusive<Done>(std::vector<std::vector<at::Tensor>>{out});
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                      const c10d::ReduceScatterOptions& o) override {
    FakeProcessGroup::_reduce_scatter_base(out, in, o);
    return c10::make_intrusive<Done>(std::vector<std::vector<at::Tensor>>{{out}});
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override {
    FakeProcessGroup::barrier(o);
    return c10::make_intrusive<Done>(std::vector<std::vector<at::Tensor>>{});
  }
};


// Note [NCCL collectives complete on the host]
// NCCL's are asynchronous twice: issued on NCCL's stream, and its Work's wait() only makes the current
// stream wait for that one. A rank's code expects a collective done when it returns (as Gloo's, above),
// so on cuda the wrapper synchronizes the current stream after wait(): the collective's outputs are
// written, and what NCCL stashed of its inputs (TORCH_NCCL_AVOID_RECORD_STREAMS, the default) was let go
// in wait(), on the rank's thread. RecordFunction is off as for Gloo: its copies are NCCL's, not the
// step's transfers. Two NCCL ranks have not run yet (the lent GPU machines have one GPU; ci/gpu_check.sh
// runs a one-rank group): to check there, NCCL's watchdog keeps a copy of each Work, holding its outputs
// until its next pass, which may free a collective's output later than the rank lets go of it.
class CompletedCollectives final : public c10d::Backend {
 public:
  // Gloo's: its staging is host memory (Note [Gloo's buffers are host memory]). NCCL's: completed on
  // the host by synchronizing the current stream (Note [NCCL collectives complete on the host]).
  enum class Kind { kGlooOnTheHost, kNcclOnTheDevice };
  CompletedCollectives(c10::intrusive_ptr<c10d::Backend> group, Kind kind)
      : Backend(group->getRank(), group->getSize()), group_(std::move(group)), kind_(kind) {}
  const std::string getBackendName() const override { return group_->getBackendName(); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& t, const c10d::BroadcastOptions& o) override {
    return Waited([&] { return group_->broadcast(t, o); }, {t});
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) override {
    return Waited([&] { return group_->allreduce(t, o); }, {t});
  }
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& t, const c10d::ReduceOptions& o) override {
    return Waited([&] { return group_->reduce(t, o); }, {t});
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                           const c10d::AllgatherOptions& o) override {
    return Waited([&] { return group_->allgather(out, in, o); }, out);
  }
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& o) override {
    return Waited([&] { return group_->_allgather_base(out, in, o); }, {{out}});
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
                                                const c10d::ReduceScatterOptions& o) override {
    return Waited([&] { return group_->reduce_scatter(out, in, o); }, {out});
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                      const c10d::ReduceScatterOptions& o) override {
    return Waited([&] { return group_->_reduce_scatter_base(out, in, o); }, {{out}});
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override {
    return Waited([&] { return group_->barrier(o); }, {});
  }

 private:
  template <class Collective>
  c10::intrusive_ptr<c10d::Work> Waited(Collective collective, const std::vector<std::vector<at::Tensor>>& outputs) {
    std::optional<ProcessHostAllocationScope> host;
    if (kind_ == Kind::kGlooOnTheHost) host.emplace();
    // Gloo's worker runs the collective under the thread-local state captured when it was issued.
    const at::RecordFunctionGuard unobserved(/*is_enabled=*/false);
    c10::intrusive_ptr<c10d::Work> work = collective();
    work->wait();
    if (kind_ == Kind::kNcclOnTheDevice) {
      SynchronizeCurrentStream();
      return c10::make_intrusive<Done>(outputs);  // Note [A completed Work's future]
    }
    // What the caller waits for again is done: Gloo's reduce-scatter is a LambdaWork whose every wait()
    // copies its result out of its staging again, outside these scopes (a host block's copy: a
    // "transfer" per fsdp unit in backward, and a transfer-in-recompute diagnosis with it).
    c10::intrusive_ptr<c10d::Work> done = c10::make_intrusive<Done>(outputs);  // Note [A completed Work's future]
    // Note [Gloo's buffers are host memory]: the worker lets go of the work a moment after completing it.
    for (const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
         work.use_count() > 1 && std::chrono::steady_clock::now() < deadline;) {
      std::this_thread::yield();
    }
    return done;
  }

  c10::intrusive_ptr<c10d::Backend> group_;  // Gloo's or NCCL's (kind_)
  Kind kind_;
};

std::optional<RealRanks> g_joined;
c10::intrusive_ptr<c10d::Store> g_store;
int64_t g_groups_made = 0;
// Note [A rank's groups live until it exits]: every group this rank made (gloo's, and NCCL's alike). A
// rank whose step failed (an OOM) would otherwise close its connections when its run lets go of the
// group, before it has written its measurement: a sibling waiting in a collective then fails with gloo's
// "Connection closed by peer", ends first, and the runner named that sibling and killed the rank that
// failed first. Held here, the connections close when the process exits, after its measurement is
// written, so the runner sees the failing rank end first. The leak is one group per run of this one-rank
// process.
std::vector<c10::intrusive_ptr<c10d::Backend>>* g_groups = new std::vector<c10::intrusive_ptr<c10d::Backend>>();

}  // namespace

void JoinRealRanks(const RealRanks& ranks) {
  OOMGUARD_CHECK(!g_joined) << "a process is one rank, and joins once";
  OOMGUARD_CHECK(ranks.world > 1 && ranks.rank >= 0 && ranks.rank < ranks.world);
  g_joined = ranks;
}

const RealRanks* JoinedRealRanks() { return g_joined ? &*g_joined : nullptr; }

c10::intrusive_ptr<c10d::Backend> MakeRankGroup(const ParallelSpec& spec, c10::DeviceType device) {
  const int rank = static_cast<int>(spec.rank), world = static_cast<int>(spec.world);
  if (!g_joined) return c10::make_intrusive<FakeGroup>(rank, world);
  OOMGUARD_CHECK(spec.world == g_joined->world && spec.rank == g_joined->rank)
      << "rank " << spec.rank << " of " << spec.world << " asked for a group, but this process joined rank "
      << g_joined->rank << " of " << g_joined->world;
  OOMGUARD_CHECK(device == c10::kCPU || device == c10::kCUDA)
      << "real ranks run on cpu (Gloo) and cuda (NCCL), not " << device;
  if (!g_store) {
    g_store = c10::make_intrusive<c10d::FileStore>(g_joined->store_path, world);
    g_store->setTimeout(g_joined->timeout);
  }
  const std::string prefix = "group-" + std::to_string(g_groups_made++);
  auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, g_store);
  using Kind = CompletedCollectives::Kind;
  if (device == c10::kCUDA) {  // Note [Real ranks on cuda]
#ifdef OOMGUARD_WITH_CUDA
    g_groups->push_back(c10::make_intrusive<CompletedCollectives>(MakeNcclGroup(store, rank, world, g_joined->timeout),
                                                                  Kind::kNcclOnTheDevice));
#else
    OOMGUARD_CHECK(false) << "this build has no cuda backend";
#endif
    return g_groups->back();
  }
  auto options = c10d::ProcessGroupGloo::Options::create(g_joined->timeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  options->threads = 1;  // every collective is waited for at once: one worker is enough
  g_groups->push_back(c10::make_intrusive<CompletedCollectives>(
      c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options), Kind::kGlooOnTheHost));
  return g_groups->back();
}

}  // namespace oomguard
