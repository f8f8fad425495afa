#include "diagnose/run_observer.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "allocators/cpu_tracking_allocator.h"
#include "base/check.h"
#include "diagnose/random_ops.h"
#include "diagnose/run_screen.h"
#include "nn/checkpoint.h"
#include "ops/op_stream.h"

namespace oomguard {

struct RunObserver::State {
  State(Ledger& ledger, const LayerTrace* trace, RunObservations* out) : ledger(ledger), trace(trace), out(out) {}

  struct StorageEntry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    int64_t iteration;
    int phase;
    int location;
  };
  struct NodeEntry {
    std::weak_ptr<torch::autograd::Node> node;
    int64_t iteration;
    int phase;
    int location;
  };
  struct GradTensor {
    c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> tensor;
    int location;
  };

  Ledger& ledger;
  const LayerTrace* trace;
  RunObserver::CallerLocation caller;  // may be empty
  // Iteration N's allocations are booked in epoch first_epoch + N % 2 (Note [Epochs]): of the pairs
  // after epoch 0, the first that holds no live bytes.
  int first_epoch = 1;
  RunObservations* out;
  std::mutex mutex;  // guards everything below
  c10::DeviceType device = c10::DeviceType::CPU;
  int64_t iteration = 0;
  std::unordered_map<const c10::StorageImpl*, StorageEntry> storages;
  std::unordered_map<const torch::autograd::Node*, NodeEntry> nodes;
  std::vector<GradTensor> grad_tensors;  // non-leaf outputs since the last backward
  std::vector<std::string> locations{""};
  std::unordered_map<std::string, int> location_index{{"", 0}};
  uint64_t location_moves = ~uint64_t{0};  // trace->moves() when location_now was looked up
  int location_now = 0;
  std::map<int64_t, int64_t> iteration_start_event;
  // Entries of freed storages, nodes and tensors are dropped at each iteration's end, and when the
  // maps double between ends: a run without iterations (a long evaluation) stays bounded.
  static constexpr size_t kMinPruneAt = 4096;
  size_t prune_at = kMinPruneAt;

  size_t Tracked() const { return storages.size() + nodes.size() + grad_tensors.size(); }

  void PruneIfDoubled() {
    if (Tracked() < prune_at) return;
    Prune();
    prune_at = std::max(kMinPruneAt, 2 * Tracked());
  }
  // What the running evaluation (this iteration, this phase) made and still holds; nodes 0: no graph.
  EvalFinding EvalNow(int phase) {
    EvalFinding finding;
    finding.iteration = iteration;
    const int64_t it = iteration;
    finding.nodes = AliveNodes([&](const NodeEntry& e) { return e.iteration == it && e.phase == phase; }, &finding.root,
                               &finding.where);
    if (finding.nodes == 0) return finding;
    finding.bytes = AliveBytes([&](const StorageEntry& e) { return e.iteration == it && e.phase == phase; }, nullptr);
    finding.event_index = ledger.CurrentPhaseStartEvent();
    return finding;
  }

  // The index of where the controlling thread is now; looked up again only when the trace moved.
  // `caller`: what SetCallerLocation's function said for this operator, which wins when not empty.
  int Location(const std::string& caller_location) {
    if (!caller_location.empty()) {
      auto [it, inserted] = location_index.try_emplace(caller_location, static_cast<int>(locations.size()));
      if (inserted) locations.push_back(caller_location);
      return it->second;
    }
    if (trace == nullptr) return 0;
    const uint64_t moves = trace->moves();
    if (moves == location_moves) return location_now;
    auto [it, inserted] = location_index.try_emplace(trace->current(), static_cast<int>(locations.size()));
    if (inserted) locations.push_back(trace->current());
    location_moves = moves;
    location_now = it->second;
    return location_now;
  }

  bool PhaseIs(int index, std::string_view name) const { return ledger.PhaseName(index) == name; }
  int EpochOf(int64_t iteration) const { return first_epoch + static_cast<int>(iteration & 1); }
  void TakeFreeEpochs() {
    for (int first = 1; first + 1 < Ledger::kEpochs; first += 2) {
      int64_t bytes = 0;
      for (int phase = 0; phase < Ledger::kMaxPhases; ++phase) {
        bytes += ledger.LiveBytesFrom(phase, first) + ledger.LiveBytesFrom(phase, first + 1);
      }
      if (bytes == 0) {
        first_epoch = first;
        return;
      }
    }
    first_epoch = 1;  // none free: what is left alive may make a screen watch, needlessly
  }
  // What may rightly outlive an iteration: what its backward and optimizer make (gradients, state).
  std::vector<bool> StatePhases() const {
    std::vector<bool> state_phase(Ledger::kMaxPhases);
    for (int i = 0; i < Ledger::kMaxPhases; ++i) {
      state_phase[i] = PhaseIs(i, "backward") || PhaseIs(i, "optimizer") || PhaseIs(i, "zero_grad");
    }
    return state_phase;
  }

  // `allocated`: the op allocated on the device while it ran. A storage is the iteration's, phase's and
  // layer's whose op allocated it: a view (w.t()) or an in-place result names an older storage, and a
  // parameter's first view must not make the parameter the forward's.
  void Saw(const at::Tensor& t, int phase, int location, bool allocated) {
    if (!t.defined() || !t.has_storage() || t.device().type() != device) return;
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) return;
    const c10::Storage& storage = t.storage();
    if (allocated && !t.is_view() && storage.nbytes() > 0 && !IsHostAllocation(storage.data_ptr())) {
      const c10::StorageImpl* key = storage.unsafeGetStorageImpl();
      auto found = storages.find(key);
      if (found == storages.end() || found->second.storage.expired()) {
        storages.insert_or_assign(key, StorageEntry{storage.getWeakStorageImpl(), iteration, phase, location});
      }
    }
    const std::shared_ptr<torch::autograd::Node>& node = t.grad_fn();
    if (!node) return;
    auto seen = nodes.find(node.get());
    if (seen == nodes.end() || seen->second.node.expired()) {
      nodes.insert_or_assign(node.get(), NodeEntry{node, iteration, phase, location});
    }
    grad_tensors.push_back(
        {c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(t.getIntrusivePtr()), location});
  }

  // The newest alive node among those `keep` selects: its name and where it was made.
  template <typename Keep>
  int64_t AliveNodes(Keep keep, std::string* root, std::string* where) {
    int64_t count = 0;
    uint64_t newest = 0;
    for (const auto& [key, entry] : nodes) {
      if (!keep(entry)) continue;
      const std::shared_ptr<torch::autograd::Node> node = entry.node.lock();
      if (!node) continue;
      ++count;
      if (count == 1 || node->sequence_nr() >= newest) {
        newest = node->sequence_nr();
        *root = node->name();
        *where = locations[entry.location];
      }
    }
    return count;
  }

  template <typename Keep>
  int64_t AliveBytes(Keep keep, std::vector<AliveGroup>* groups) {
    std::map<std::pair<int, int>, int64_t> by_place;
    int64_t bytes = 0;
    for (const auto& [key, entry] : storages) {
      if (!keep(entry)) continue;
      const c10::intrusive_ptr<c10::StorageImpl> storage = entry.storage.lock();
      if (!storage) continue;
      const auto n = static_cast<int64_t>(storage->nbytes());
      bytes += n;
      by_place[{entry.phase, entry.location}] += n;
    }
    if (groups != nullptr) {
      for (const auto& [place, n] : by_place)
        groups->push_back({ledger.PhaseName(place.first), locations[place.second], n});
      std::stable_sort(groups->begin(), groups->end(),
                       [](const AliveGroup& a, const AliveGroup& b) { return a.bytes > b.bytes; });
    }
    return bytes;
  }

  void Prune() {
    std::erase_if(storages, [](const auto& kv) { return kv.second.storage.expired(); });
    std::erase_if(nodes, [](const auto& kv) { return kv.second.node.expired(); });
    std::erase_if(grad_tensors, [](const GradTensor& g) { return g.tensor.expired(); });
  }
};

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

struct RunObserver::Watch final : OpObserver {
  Watch() : subscription(this, {.op_starts = true, .op_ends = true, .outputs = true}) {}
  std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) override { return OnStart(fn); }
  void OnOpEnd(const at::RecordFunction& fn, at::ObserverContext* context) override { OnEnd(fn, context); }
  OpSubscription subscription;
};

RunObserver::RunObserver(Ledger& ledger, const LayerTrace* trace, c10::DeviceType device, Mode mode)
    : state_(std::make_unique<State>(ledger, trace, &observations_)) {
  state_->device = device;
  t_running.clear();  // an op a previous observer saw start but not end
  RunObserver::State* expected = nullptr;
  OOMGUARD_CHECK(g_state.compare_exchange_strong(expected, state_.get())) << "only one RunObserver may exist at a time";
  ledger.SetEpoch(0);
  state_->TakeFreeEpochs();
  if (mode == Mode::kWatch) {
    watch_ = std::make_unique<Watch>();
  } else {
    screen_ = std::make_unique<Screen>(ledger);
  }
}

RunObserver::~RunObserver() {
  watch_.reset();
  screen_.reset();
  state_->ledger.SetEpoch(0);
  g_state.store(nullptr, std::memory_order_release);
}

std::string RunObserver::suspicion() const { return screen_ ? screen_->Suspicion() : ""; }

void RunObserver::SetCallerLocation(CallerLocation where) { state_->caller = std::move(where); }

void RunObserver::BeginIteration(int64_t iteration) {
  state_->ledger.SetEpoch(state_->EpochOf(iteration));
  if (screen_) screen_->AtBeginIteration();
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->iteration = iteration;
  state_->grad_tensors.clear();
  state_->iteration_start_event[iteration] = state_->ledger.CurrentPhaseStartEvent();
}

void RunObserver::BackwardDone() {
  if (screen_) {
    screen_->AtBackwardDone();
    return;
  }
  std::lock_guard<std::mutex> lock(state_->mutex);
  RetainedGradFinding finding;
  finding.iteration = state_->iteration;
  std::unordered_set<const c10::StorageImpl*> counted;
  int64_t largest = 0;
  for (const State::GradTensor& g : state_->grad_tensors) {
    c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> impl = g.tensor.lock();
    if (!impl) continue;
    const at::Tensor t(std::move(impl));
    if (t.is_leaf() || !t.retains_grad()) continue;
    const at::Tensor& grad = t.grad();
    if (!grad.defined() || !grad.has_storage()) continue;
    if (!counted.insert(grad.storage().unsafeGetStorageImpl()).second) continue;
    const auto n = static_cast<int64_t>(grad.storage().nbytes());
    ++finding.tensors;
    finding.bytes += n;
    if (n > largest) {
      largest = n;
      finding.where = state_->locations[g.location];
    }
  }
  state_->grad_tensors.clear();
  if (finding.tensors > 0) observations_.retained.push_back(std::move(finding));
}

void RunObserver::EvalDone() {
  const int phase = state_->ledger.phase_index();
  if (screen_) {
    screen_->AtEvalDone(phase);
    return;
  }
  std::lock_guard<std::mutex> lock(state_->mutex);
  EvalFinding finding = state_->EvalNow(phase);
  // Nodes holding nothing the evaluation allocated (a view of a parameter) cost no memory.
  if (finding.nodes > 0 && finding.bytes > 0) observations_.evals.push_back(std::move(finding));
}

void RunObserver::EndIteration() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  State& s = *state_;
  s.grad_tensors.clear();
  ++observations_.iterations;
  if (screen_) {
    screen_->AtEndIteration(s.iteration, s.EpochOf(s.iteration - 1), s.StatePhases());
    return;
  }
  if (s.iteration >= 2) {
    const int64_t previous = s.iteration - 1;
    KeptFinding kept;
    kept.iteration = previous;
    kept.nodes =
        s.AliveNodes([&](const State::NodeEntry& e) { return e.iteration == previous; }, &kept.root, &kept.root_where);
    const std::vector<bool> state_phase = s.StatePhases();
    kept.bytes = s.AliveBytes(
        [&](const State::StorageEntry& e) {
          return e.iteration == previous && e.phase >= 0 && e.phase < Ledger::kMaxPhases && !state_phase[e.phase];
        },
        &kept.groups);
    auto start = s.iteration_start_event.find(previous);
    if (start != s.iteration_start_event.end()) kept.event_index = start->second;
    observations_.kept.push_back(std::move(kept));
  }
  s.Prune();
  s.prune_at = std::max(State::kMinPruneAt, 2 * s.Tracked());
}

size_t RunObserver::tracked() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->Tracked();
}

}  // namespace oomguard
