#include "nn/checkpoint.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <unordered_set>
#include <utility>

#include "allocators/cpu_tracking_allocator.h"
#include "nn/autocast/autocast.h"

namespace oomguard {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct RngState {
  at::Device device;
  at::Tensor state;
};

// The default generators a segment on `device` may draw from: cpu always (as in Python's checkpoint), plus
// the input's cuda device; none for meta. Context::defaultGenerator reaches cuda through ATen's hooks, so
// this needs no cuda header, and it also serves a build without OOMGUARD_WITH_CUDA that meets cuda tensors.
std::vector<at::Device> RngDevices(const at::Device& device) {
  if (device.is_meta()) return {};
  if (device.is_cuda()) return {at::Device(at::kCPU), device};
  return {at::Device(at::kCPU)};
}

// Generator states are host tensors (a cuda generator's too): on a GPU they never touch device memory,
// so the cpu backend books them as host memory (Note [Host memory on the cpu backend]).
std::vector<RngState> SaveRng(const std::vector<at::Device>& devices) {
  HostAllocationScope host;
  std::vector<RngState> states;
  for (const at::Device& device : devices) {
    at::Generator generator = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    states.push_back({device, generator.get_state()});
  }
  return states;
}

void RestoreRng(const std::vector<RngState>& states) {
  for (const RngState& s : states) {
    at::Generator generator = at::globalContext().defaultGenerator(s.device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(s.state);
  }
}

// Replays saved generator states for a scope, then puts the caller's back (also when the segment throws).
class RngReplay {
 public:
  explicit RngReplay(const std::vector<RngState>& replay) : caller_(SaveRng(DevicesOf(replay))) { RestoreRng(replay); }
  ~RngReplay() { RestoreRng(caller_); }
  RngReplay(const RngReplay&) = delete;
  RngReplay& operator=(const RngReplay&) = delete;

 private:
  static std::vector<at::Device> DevicesOf(const std::vector<RngState>& states) {
    std::vector<at::Device> devices;
    for (const RngState& s : states) devices.push_back(s.device);
    return devices;
  }
  std::vector<RngState> caller_;
};

// What the backward needs besides saved tensors. A capsule is the only slot in AutogradContext::saved_data
// (an IValue map) that can hold a C++ object such as a std::function.
struct CheckpointState : torch::CustomClassHolder {
  Segment segment;
  std::vector<RngState> rng;              // empty: do not replay
  std::vector<AutocastSetting> autocast;  // the forward's, replayed for the recomputation
  bool preserve_rng_state = true;         // what the caller asked for (meta keeps no state either way)
};

thread_local int t_unseeded_recomputations = 0;
std::atomic<UnseededRecomputationListener> g_unseeded_listener{nullptr};

// Marks a recomputation that does not replay the forward's RNG state, for RecomputingWithoutRngState.
class UnseededRecomputation {
 public:
  explicit UnseededRecomputation(bool active) : active_(active) {
    if (active_ && ++t_unseeded_recomputations == 1) Tell(true);
  }
  ~UnseededRecomputation() {
    if (active_ && --t_unseeded_recomputations == 0) Tell(false);
  }
  UnseededRecomputation(const UnseededRecomputation&) = delete;
  UnseededRecomputation& operator=(const UnseededRecomputation&) = delete;

 private:
  static void Tell(bool begins) {
    if (UnseededRecomputationListener listener = g_unseeded_listener.load(std::memory_order_acquire)) listener(begins);
  }

  bool active_;
};

// Throws if the recomputed graph reaches a leaf requiring grad that is not among `named` (the gradient
// edges of the input and params): autograd::grad would never be asked for its gradient.
void CheckAllLeavesNamed(const at::Tensor& output, const std::unordered_set<const torch::autograd::Node*>& named) {
  // The output's gradient edge, not its grad_fn: a segment may return a leaf (its input, a parameter).
  std::vector<torch::autograd::Node*> stack{torch::autograd::impl::gradient_edge(output).function.get()};
  std::unordered_set<torch::autograd::Node*> seen{stack.back()};
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (named.count(node)) continue;
    if (auto* leaf = dynamic_cast<torch::autograd::AccumulateGrad*>(node)) {
      TORCH_CHECK(false, "Checkpoint: the segment uses a tensor of shape ", leaf->variable.sizes(),
                  " that requires grad but is not in `params`; its gradient would be lost");
    }
    for (const torch::autograd::Edge& edge : node->next_edges()) {
      if (edge.is_valid() && seen.insert(edge.function.get()).second) stack.push_back(edge.function.get());
    }
  }
}

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // `params` arrives as at::TensorList because Function::apply only routes gradients to Tensor, optional
  // Tensor and TensorList arguments: a std::vector<at::Tensor> would be taken as a non-tensor argument.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, at::TensorList params,
                            const Segment& segment, bool preserve_rng_state) {
    auto state = c10::make_intrusive<CheckpointState>();
    state->segment = segment;
    state->preserve_rng_state = preserve_rng_state;
    if (preserve_rng_state) state->rng = SaveRng(RngDevices(input.device()));
    state->autocast = CurrentAutocast();
    at::Tensor output = segment(input);  // grad mode is off here: no graph, no saved activations
    TORCH_CHECK(output.defined(), "Checkpoint: the segment returned an undefined tensor");
    variable_list saved{input};
    saved.insert(saved.end(), params.begin(), params.end());
    ctx->save_for_backward(std::move(saved));
    ctx->saved_data["state"] = at::IValue::make_capsule(std::move(state));
    return output;
  }

  // Returns one gradient per forward argument: input, each param, then none for segment and the flag.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    TORCH_CHECK(!c10::GradMode::is_enabled(),
                "Checkpoint: create_graph=true is not supported; the recomputation starts from a detached input, "
                "so higher-order gradients through it would be lost");
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    variable_list saved = ctx->get_saved_variables();  // input, params...
    at::Tensor input = saved[0].detach().requires_grad_(saved[0].requires_grad());
    at::Tensor output;
    {
      std::optional<RngReplay> replay;
      if (!state->rng.empty()) replay.emplace(state->rng);
      c10::AutoGradMode grad_on(true);
      AutocastScope autocast(state->autocast);  // as PyTorch's checkpoint recomputes under the forward's autocast
      UnseededRecomputation unseeded(!state->preserve_rng_state);
      output = state->segment(input);
    }

    std::unordered_set<const torch::autograd::Node*> named;
    variable_list wrt;
    std::vector<size_t> slots;  // wrt[i] is forward argument slots[i]
    for (size_t i = 0; i < saved.size(); ++i) {
      const at::Tensor& t = i == 0 ? input : saved[i];
      if (!t.requires_grad()) continue;
      named.insert(torch::autograd::impl::gradient_edge(t).function.get());
      if (ctx->needs_input_grad(i)) {
        wrt.push_back(t);
        slots.push_back(i);
      }
    }
    variable_list grads(saved.size() + 2);
    if (!output.requires_grad()) return grads;  // the segment did not use anything differentiable
    CheckAllLeavesNamed(output, named);
    if (wrt.empty()) return grads;
    variable_list computed = torch::autograd::grad({output}, wrt, {grad_outputs[0]}, /*retain_graph=*/false,
                                                   /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t i = 0; i < slots.size(); ++i) grads[slots[i]] = std::move(computed[i]);
    return grads;
  }
};

}  // namespace

bool RecomputingWithoutRngState() { return t_unseeded_recomputations > 0; }

void SetUnseededRecomputationListener(UnseededRecomputationListener listener) {
  g_unseeded_listener.store(listener, std::memory_order_release);
}

at::Tensor Checkpoint(const Segment& segment, const at::Tensor& input, const std::vector<at::Tensor>& params,
                      bool preserve_rng_state) {
  TORCH_CHECK(input.defined(), "Checkpoint: the input is undefined");
  bool differentiable = input.requires_grad();
  for (const at::Tensor& p : params) {
    TORCH_CHECK(p.defined(), "Checkpoint: a parameter is undefined");
    differentiable = differentiable || p.requires_grad();
  }
  if (!c10::GradMode::is_enabled() || !differentiable) {
    c10::NoGradGuard no_grad;  // what Function::apply would do, without keeping a copy or generator states
    return segment(input);
  }
  return CheckpointFunction::apply(input, at::TensorList(params), segment, preserve_rng_state);
}

}  // namespace oomguard
