// Your own LibTorch training code as an oomguard workload: register a function under a name, and the
// harness runs it under a card's cap on cpu, meta or cuda, with phases, iterations and knobs, as it
// runs the catalog's scenarios.
//
//   #include <oomguard/workload.h>
//   #include <torch/torch.h>
//
//   OOMGUARD_WORKLOAD(mlp_adam) {                        // `ctx` is the oomguard::Context&
//     const int64_t batch = ctx.Int("batch");
//     const bool eval_no_grad = ctx.Bool("eval_no_grad", true);
//     auto model = ctx.Build([] {                        // on ctx.device()
//       return torch::nn::Sequential(torch::nn::Linear(512, 2048), torch::nn::ReLU(), torch::nn::Linear(2048, 10));
//     });
//     torch::optim::Adam adam(model->parameters(), 1e-3);
//     ctx.Track(model->parameters());
//     ctx.Track(adam);
//     for (int64_t iteration : ctx.Iterations()) {
//       torch::Tensor x = torch::randn({batch, 512}, ctx.options());
//       adam.zero_grad();
//       torch::Tensor loss;
//       { auto phase = ctx.Phase("forward");   loss = model->forward(x).pow(2).mean(); }
//       { auto phase = ctx.Phase("backward");  loss.backward(); }
//       { auto phase = ctx.Phase("optimizer"); adam.step(); }
//       auto phase = ctx.Phase("eval");
//       std::optional<torch::NoGradGuard> no_grad;
//       if (eval_no_grad) no_grad.emplace();
//       torch::Tensor y = model->forward(x);
//     }
//   }
//
// and a scenario file names it:
//
//   {"name": "mlp-eval", "summary": "...", "workload": "mlp_adam", "knobs": {"batch": 64},
//    "loop": {"iterations": 3},
//    "variants": {"pitfall": {"knobs": {"eval_no_grad": false}}, "fixed": {}}, "expect": {...}}
//
// The function runs once per variant, in a child process of the program that registered it
// (oomguard::Main, oomguard/main.h), or in-process through oomguard::Measure (oomguard/measure.h).
// Before calling it the harness seeds ATen's generator with the scenario's seed, installs the cap and
// resets the statistics; everything it allocates on ctx.device() is booked, under the current phase.
//
// Iterations: the function loops over ctx.Iterations(), which yields 1..N (N: the scenario's
// loop.iterations or --iterations); each completed pass is one iteration of the report (its peak,
// the bytes live after it, and so growth per iteration and leaks). Only completed iterations count: an
// OOM in the third leaves two. A function that never calls Iterations() is measured as one run.
//
// Phases: ctx.Phase("forward") returns a guard that makes "forward" current until it goes out of
// scope (then the previous phase is current again); ctx.SetPhase("forward") switches until the next
// switch. The phases: setup (current when the function starts, until the loop begins), step (inside
// the loop, outside any phase the function marks), transfer, forward, backward, optimizer,
// zero_grad, eval. What the report derives from them: forward_saved_bytes (what the first forward
// phase left live), live bytes after each backward, gradient bytes after the first backward.
//
// Knobs: ctx.Int/Number/Bool/String("name") read what the variant sets under "knobs"; with a
// fallback the knob may be left out. A knob the function needs and the variant does not set, one of
// another type, or one the variant sets and the function never reads (checked when it completes) is
// an input error: the variant is UNRESOLVED with the file and variant named (exit code 2).
//
// Errors: an OOM at the cap, an injected failure and LibTorch's errors (c10::Error) end the variant
// as its outcome, as for the catalog; WorkloadError is the context's way of saying the workload and
// its scenario disagree; do not catch it.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "oomguard/knobs.h"

namespace torch::optim {
class Optimizer;
}
namespace c10d {
class Backend;  // <torch/csrc/distributed/c10d/Backend.hpp>, which a workload calling collectives includes
}

namespace oomguard {

// The workload and its scenario disagree: a knob missing, of another type or never read, an unknown
// phase, Iterations() called twice.
class WorkloadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Context {
 public:
  struct State;  // the harness's side (workload/user_workload.cpp)
  explicit Context(State* state) : state_(state) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // --- where to build the model and the data ---
  // The backend's device (cpu, meta or cuda) and float32: torch::randn({b, d}, ctx.options()).
  at::TensorOptions options() const;
  at::Device device() const;
  std::string backend() const;  // "cpu", "meta", "cuda"
  // false on meta: tensors have shapes but no values, so .item(), printing and data-dependent
  // control flow are not available.
  bool has_data() const;
  int64_t seed() const;  // the scenario's seed, already given to at::manual_seed

  // A model on the backend's device: make() builds it (a torch::nn module holder, or a
  // std::shared_ptr to your own module) and Build moves it with ->to(device()).
  //   auto model = ctx.Build([] { return torch::nn::Sequential(torch::nn::Linear(512, 512)); });
  // On meta, LibTorch cannot move a module's parameters there (Module::to(kMeta) fails in set_data):
  // Build then throws WorkloadError saying so, unless make() made every parameter on meta itself
  // (register_parameter("w", torch::empty({out, in}, ctx.options()))), which is also how a model too
  // large for the host never touches it.
  template <typename Make>
  auto Build(Make&& make) {
    auto model = std::forward<Make>(make)();
    CheckMovable(model->parameters());
    model->to(device());
    return model;
  }

  // --- knobs: what the variant sets under "knobs" ---
  int64_t Int(const std::string& name) const;
  int64_t Int(const std::string& name, int64_t fallback) const;
  double Number(const std::string& name) const;  // an integer knob reads as a number too
  double Number(const std::string& name, double fallback) const;
  bool Bool(const std::string& name) const;
  bool Bool(const std::string& name, bool fallback) const;
  std::string String(const std::string& name) const;
  std::string String(const std::string& name, const std::string& fallback) const;

  // --- phases ---
  class [[nodiscard]] PhaseGuard {
   public:
    ~PhaseGuard();
    PhaseGuard(const PhaseGuard&) = delete;
    PhaseGuard& operator=(const PhaseGuard&) = delete;

   private:
    friend class Context;
    PhaseGuard(State* state, int previous) : state_(state), previous_(previous) {}
    State* state_;
    int previous_;
  };
  PhaseGuard Phase(std::string_view name);
  void SetPhase(std::string_view name);

  // --- iterations: for (int64_t i : ctx.Iterations()) { one training step } ---
  class IterationRange {
   public:
    class iterator {
     public:
      int64_t operator*() const { return index_; }
      iterator& operator++();
      bool operator!=(const iterator& other) const { return index_ != other.index_; }

     private:
      friend class IterationRange;
      iterator(State* state, int64_t index) : state_(state), index_(index) {}
      State* state_;
      int64_t index_;
    };
    iterator begin();
    iterator end() const { return iterator(state_, count_ + 1); }

   private:
    friend class Context;
    IterationRange(State* state, int64_t count) : state_(state), count_(count) {}
    State* state_;
    int64_t count_;
  };
  IterationRange Iterations();

  // --- ranks: the variant's "parallel": {"world": N, "rank": r} (Note [A workload's own ranks]) ---
  // This run is rank Rank() of WorldSize() (0 of 1 without `parallel`). ProcessGroup() is the group its
  // collectives go to, made on the first call and the same object after: on cpu with world > 1 the
  // runner starts WorldSize() real ranks, a process each, and this is c10d's ProcessGroupGloo joining
  // them (real collectives, real numbers); on meta, cuda, in oomguard::Measure and at world 1, a
  // c10d::FakeProcessGroup of WorldSize() ranks, which moves no data (so one process measures any rank
  // of any world; world 1 needs no branch: averaging over one rank changes nothing). Call it on every
  // rank, in the same order as the other groups the run makes. Collectives are called on the backend
  // and waited for: group->allreduce(tensors)->wait() (c10d's dispatcher ops have no Meta kernels in
  // a C++ process).
  //   std::vector<at::Tensor> grads{p.grad()};
  //   ctx.ProcessGroup()->allreduce(grads)->wait();  // sums over the ranks
  //   p.grad().div_(ctx.WorldSize());
  int64_t Rank() const;
  int64_t WorldSize() const;
  c10::intrusive_ptr<c10d::Backend> ProcessGroup();

  // --- what the report attributes ---
  // The model's parameters: parameter bytes, gradient bytes after the first backward and the
  // gradient digest. Call again to add another model's.
  void Track(const std::vector<at::Tensor>& parameters);
  // The optimizer: optimizer-state bytes are the tensors of its state after the first iteration
  // (SGD, Adam, AdamW, RMSprop, Adagrad; another kind: what the first "optimizer" phase left live).
  // The optimizer must outlive the loop; the harness reads it only at iteration boundaries.
  void Track(torch::optim::Optimizer& optimizer);

  // --- data that starts on the host ---
  // Allocations made while the guard lives are host memory, not the card's: on cpu they are left
  // out of the ledger (on a GPU they are host memory anyway).
  class [[nodiscard]] HostMemory {
   public:
    HostMemory();
    ~HostMemory();
    HostMemory(const HostMemory&) = delete;
    HostMemory& operator=(const HostMemory&) = delete;

   private:
    std::unique_ptr<struct HostScopeHolder> scope_;
  };
  // Options for a tensor that starts on the host (a data loader's batch): cpu float32 on cpu and cuda;
  // meta on meta, where a host batch would cost this machine real memory and time in every run and fit
  // trial for values nothing reads. torch::randn({batch, d}, ctx.host_options()) inside HostMemory.
  at::TensorOptions host_options() const;
  // A copy of `host` on ctx.device(): booked as the iteration's inputs, and counted as a transfer. On
  // meta, a host tensor on the cpu (not made with host_options()) is warned about once per run.
  at::Tensor ToDevice(const at::Tensor& host);

  // --- mixed precision ---
  // torch.autocast(device_type=ctx.device().type(), dtype) while the guard lives, on every backend:
  // at::autocast on cpu and cuda, and on meta, which LibTorch's autocast skips, oomguard's copy of
  // the cpu autocast table (nn/autocast/meta_autocast.h), so a meta run allocates what a cpu run does; with a
  // card's kernels (`--kernels cuda`) its copy of CUDA's table, so it allocates what the GPU run does.
  // dtype: at::kBFloat16 or at::kHalf (else WorkloadError). Guards nest; the weight-cast cache is
  // cleared when the outermost one ends. Run the backward outside it, as PyTorch recommends:
  //   { auto autocast = ctx.Autocast(at::kBFloat16); loss = model->forward(x).mean(); }
  //   loss.backward();
  class [[nodiscard]] AutocastGuard {
   public:
    ~AutocastGuard();
    AutocastGuard(AutocastGuard&&) noexcept;  // into a std::optional, for an autocast a knob switches
    AutocastGuard& operator=(AutocastGuard&&) noexcept;
    AutocastGuard(const AutocastGuard&) = delete;
    AutocastGuard& operator=(const AutocastGuard&) = delete;

   private:
    friend class Context;
    explicit AutocastGuard(std::unique_ptr<struct AutocastHolder> scope);
    std::unique_ptr<struct AutocastHolder> scope_;
  };
  AutocastGuard Autocast(at::ScalarType dtype) const;

 private:
  // Throws WorkloadError on meta when a parameter is not on meta already.
  void CheckMovable(const std::vector<at::Tensor>& parameters) const;
  State* state_;
};

using WorkloadFunction = std::function<void(Context&)>;

// Registers `function` under `name` ([A-Za-z_][A-Za-z0-9_.-]*); false, and nothing changes, when the
// name is taken or not such a name.
[[nodiscard]] bool RegisterWorkload(const std::string& name, WorkloadFunction function);

// The registered names, sorted.
std::vector<std::string> RegisteredWorkloads();

namespace internal {
// The macro's registration: aborts with a message naming the workload when the name is taken
// (two registrations in one program are a bug the program must not start with).
bool RegisterWorkloadOrDie(const char* name, void (*function)(Context&));
// Installs oomguard's tracking allocators; idempotent (Note [Install before the first tensor]).
bool InstallAllocators();
// Every program that includes this header installs them before main() runs.
inline const bool kAllocatorsInstalled = InstallAllocators();
}  // namespace internal

}  // namespace oomguard

// Defines and registers a workload: OOMGUARD_WORKLOAD(mlp_adam) { ... uses ctx ... }.
#define OOMGUARD_WORKLOAD(name)                                                      \
  static void oomguard_workload_##name(::oomguard::Context& ctx);                    \
  [[maybe_unused]] static const bool oomguard_workload_registered_##name =           \
      ::oomguard::internal::RegisterWorkloadOrDie(#name, &oomguard_workload_##name); \
  static void oomguard_workload_##name([[maybe_unused]] ::oomguard::Context& ctx)
