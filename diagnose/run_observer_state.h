// What a RunObserver remembers of a run (diagnose/run_observer.h): each output's storage, autograd node
// and non-leaf tensor, weakly, with the iteration, phase and layer that made it; and what of it is still
// alive at a mark. Internal to diagnose/: the watch (run_watch.cpp) fills it, the marks
// (run_observer.cpp) read it, under its mutex.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "allocators/cpu_tracking_allocator.h"
#include "diagnose/run_observer.h"

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
    std::shared_ptr<torch::autograd::Node> node;
    try {
      node = t.grad_fn();
    } catch (const c10::Error&) {
      // A view made under no_grad whose base was then modified in place (Hugging Face's weight init): its
      // grad_fn() refuses (handle_view_on_rebase), as it would refuse the user's own code; no node to watch,
      // and the refusal must not reach RecordFunction, which printed it as a warning for every such op.
      return;
    }
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

}  // namespace oomguard
