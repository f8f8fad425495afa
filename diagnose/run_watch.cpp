#include "diagnose/run_watch.h"

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "diagnose/random_ops.h"
#include "diagnose/run_observer_state.h"
#include "nn/checkpoint.h"

namespace oomguard {

namespace {

std::atomic<RunObserver::State*> g_state{nullptr};
thread_local int t_random_depth = 0;  // random ops nest (dropout -> bernoulli_): count the outermost

constexpr size_t kMaxInplaceOps = 256;

bool EndsWithUnderscore(std::string_view name) {
  return name.size() > 1 && name.back() == '_' && name[name.size() - 2] != '_';
}

template <typename Visit>
void ForEachTensor(const std::vector<c10::IValue>& values, Visit visit) {
  for (const c10::IValue& v : values) {
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) visit(t);
    } else if (v.isTuple()) {
      for (const c10::IValue& e : v.toTupleRef().elements()) {
        if (e.isTensor()) visit(e.toTensor());
      }
    }
  }
}

// Each running op, innermost last (ops nest, and start and end run on one thread): the ledger's
// allocation count when it started, so the end tells whether it allocated, and what its name says,
// worked out once. No heap allocation per op.
struct OpFrame {
  int64_t allocations_at_start;
  bool random;
  bool inplace;
};
thread_local std::vector<OpFrame> t_running;
thread_local std::string t_caller_location;  // the outermost running op's, from State::caller

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  RunObserver::State* state = g_state.load(std::memory_order_acquire);
  if (state == nullptr) return nullptr;
  const std::string_view name = fn.name();
  const OpFrame frame{state->ledger.alloc_count(), IsRandomOp(name), EndsWithUnderscore(name)};
  if (t_running.empty()) {  // nested ops share the outermost one's line
    if (state->caller) {
      t_caller_location = state->caller();
    } else {
      t_caller_location.clear();
    }
  }
  t_running.push_back(frame);
  if (frame.random) ++t_random_depth;
  if (frame.inplace) {
    std::lock_guard<std::mutex> lock(state->mutex);
    state->out->last_inplace_started = name;
    state->out->last_inplace_started_location = state->trace ? state->trace->current() : "";
  }
  return nullptr;
}

void OnEnd(const at::RecordFunction& fn, at::ObserverContext*) {
  RunObserver::State* state = g_state.load(std::memory_order_acquire);
  if (state == nullptr || t_running.empty()) return;  // started before the observer
  const OpFrame frame = t_running.back();
  t_running.pop_back();
  const bool allocated = state->ledger.alloc_count() != frame.allocations_at_start;
  const bool outermost_random = frame.random && t_random_depth == 1;
  if (frame.random && t_random_depth > 0) --t_random_depth;
  const int phase = state->ledger.phase_index();
  std::lock_guard<std::mutex> lock(state->mutex);
  const int location = state->Location(t_caller_location);
  const std::vector<c10::IValue>& outputs = fn.outputs();
  ForEachTensor(outputs, [&](const at::Tensor& t) { state->Saw(t, phase, location, allocated); });
  state->PruneIfDoubled();
  if (frame.inplace && !outputs.empty() && outputs[0].isTensor()) {
    const at::Tensor& self = outputs[0].toTensor();
    if (self.defined() && self.requires_grad()) {
      std::vector<InplaceOp>& ops = state->out->inplace;
      if (ops.size() >= kMaxInplaceOps) ops.erase(ops.begin(), ops.begin() + kMaxInplaceOps / 2);
      ops.push_back({std::string(fn.name()), state->ledger.PhaseName(phase), state->locations[location],
                     self.sizes().vec(), static_cast<int64_t>(self.nbytes())});
    }
  }
  if (outermost_random && RecomputingWithoutRngState()) {
    RunObservations& out = *state->out;
    ++out.unseeded_recompute_draws;
    ForEachTensor(outputs, [&](const at::Tensor& t) {
      if (t.defined()) out.unseeded_recompute_bytes += static_cast<int64_t>(t.nbytes());
    });
    if (out.unseeded_recompute_where.empty()) out.unseeded_recompute_where = state->locations[location];
  }
}

}  // namespace

std::unique_ptr<at::ObserverContext> RunObserver::Watch::OnOpStart(const at::RecordFunction& fn) { return OnStart(fn); }

void RunObserver::Watch::OnOpEnd(const at::RecordFunction& fn, at::ObserverContext* context) { OnEnd(fn, context); }

bool RunObserver::Watch::Attach(RunObserver::State* state) {
  t_running.clear();  // an op a previous observer saw start but not end
  RunObserver::State* expected = nullptr;
  return g_state.compare_exchange_strong(expected, state);
}

void RunObserver::Watch::Detach() { g_state.store(nullptr, std::memory_order_release); }

}  // namespace oomguard
