#include "ops/op_stream.h"

#include <array>
#include <atomic>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "base/check.h"

namespace oomguard {
namespace {

constexpr int kSlots = OpSubscription::kMaxOpSubscriptions;

struct Slot {
  OpObserver* observer = nullptr;  // null: free
  OpInterests interests;
  bool active = false;
};

// Subscriptions change under g_mutex; the callback reads only the atomics below. A slot's observer
// is published before the masks that name it, and stays readable until the slot is reused.
std::mutex g_mutex;
std::array<Slot, kSlots> g_slots;                            // guarded by g_mutex
std::array<std::atomic<OpObserver*>, kSlots> g_observers{};  // the slots' observers, for the callback
std::atomic<unsigned> g_start_mask{0};                       // active slots with op_starts
std::atomic<unsigned> g_end_mask{0};                         // active slots with op_ends
std::atomic<unsigned> g_backward_mask{0};                    // active slots with backward_nodes
std::atomic<unsigned> g_backward_end_mask{0};                // active slots with backward_node_ends
bool g_registered = false;                                   // guarded by g_mutex
at::CallbackHandle g_handle = 0;                             // guarded by g_mutex
OpInterests g_needs;                                         // guarded by g_mutex

// The contexts observers returned for one operator, by slot. Made only when one of them returns one.
struct SlotContexts final : at::ObserverContext {
  std::array<std::unique_ptr<at::ObserverContext>, kSlots> of;
};

template <typename Visit>
void ForEachSlot(unsigned mask, Visit visit) {
  for (; mask != 0; mask &= mask - 1) {
    const int slot = __builtin_ctz(mask);
    if (OpObserver* observer = g_observers[slot].load(std::memory_order_acquire)) visit(slot, observer);
  }
}

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    ForEachSlot(g_backward_mask.load(std::memory_order_acquire),
                [&](int, OpObserver* observer) { observer->OnBackwardNode(fn); });
    return nullptr;
  }
  std::unique_ptr<SlotContexts> contexts;
  ForEachSlot(g_start_mask.load(std::memory_order_acquire), [&](int slot, OpObserver* observer) {
    std::unique_ptr<at::ObserverContext> context = observer->OnOpStart(fn);
    if (!context) return;
    if (!contexts) contexts = std::make_unique<SlotContexts>();
    contexts->of[slot] = std::move(context);
  });
  return contexts;
}

void OnEnd(const at::RecordFunction& fn, at::ObserverContext* context) {
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    ForEachSlot(g_backward_end_mask.load(std::memory_order_acquire),
                [&](int, OpObserver* observer) { observer->OnBackwardNodeEnd(fn); });
    return;
  }
  if (fn.scope() != at::RecordScope::FUNCTION) return;
  auto* contexts = static_cast<SlotContexts*>(context);
  ForEachSlot(g_end_mask.load(std::memory_order_acquire), [&](int slot, OpObserver* observer) {
    observer->OnOpEnd(fn, contexts != nullptr ? contexts->of[slot].get() : nullptr);
  });
}

// Publishes the masks of the active slots and registers the callback their union needs, if it
// changed. Called with g_mutex held.
void Publish() {
  unsigned starts = 0, ends = 0, backward = 0, backward_ends = 0;
  OpInterests needs;
  for (int i = 0; i < kSlots; ++i) {
    const Slot& slot = g_slots[i];
    if (slot.observer == nullptr || !slot.active) continue;
    const OpInterests& in = slot.interests;
    if (in.op_starts) starts |= 1u << i;
    if (in.op_ends) ends |= 1u << i;
    if (in.backward_nodes) backward |= 1u << i;
    if (in.backward_node_ends) backward_ends |= 1u << i;
    needs.op_starts |= in.op_starts;
    needs.op_ends |= in.op_ends;
    needs.inputs |= in.inputs;
    needs.outputs |= in.outputs;
    needs.backward_nodes |= in.backward_nodes;
    needs.backward_node_ends |= in.backward_node_ends;
  }
  // Only what is watched: inputs and outputs come with operators, not with backward nodes alone.
  const bool functions = needs.op_starts || needs.op_ends;
  needs.inputs &= functions;
  needs.outputs &= functions;
  g_start_mask.store(starts, std::memory_order_release);
  g_end_mask.store(ends, std::memory_order_release);
  g_backward_mask.store(backward, std::memory_order_release);
  g_backward_end_mask.store(backward_ends, std::memory_order_release);
  const bool nodes = needs.backward_nodes || needs.backward_node_ends;
  const bool wanted = functions || nodes;
  if (g_registered == wanted && (!wanted || needs == g_needs)) return;
  // Remove, then add: on this thread no operator runs in between, and one that is running (this may
  // be called from inside one, by the allocator) ends through the same static OnEnd.
  if (g_registered) at::removeCallback(g_handle);
  g_registered = false;
  g_needs = needs;
  if (!wanted) return;
  std::unordered_set<at::RecordScope, std::hash<at::RecordScope>> scopes;
  if (functions) scopes.insert(at::RecordScope::FUNCTION);
  if (nodes) scopes.insert(at::RecordScope::BACKWARD_FUNCTION);
  const bool ends_wanted = needs.op_ends || needs.backward_node_ends;
  g_handle = at::addGlobalCallback(at::RecordFunctionCallback(&OnStart, ends_wanted ? &OnEnd : nullptr)
                                       .needsInputs(needs.inputs)
                                       .needsOutputs(needs.outputs)
                                       .scopes(scopes));
  g_registered = true;
}

}  // namespace

OpSubscription::OpSubscription(OpObserver* observer, OpInterests interests, bool active) {
  OOMGUARD_CHECK(observer != nullptr) << "OpSubscription needs an observer";
  std::lock_guard<std::mutex> lock(g_mutex);
  slot_ = -1;
  for (int i = 0; i < kSlots && slot_ < 0; ++i) {
    if (g_slots[i].observer == nullptr) slot_ = i;
  }
  OOMGUARD_CHECK(slot_ >= 0) << "more than " << kSlots << " operator observers at once";
  g_slots[slot_] = Slot{observer, interests, active};
  g_observers[slot_].store(observer, std::memory_order_release);
  Publish();
}

OpSubscription::~OpSubscription() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_slots[slot_] = Slot{};
  Publish();
  g_observers[slot_].store(nullptr, std::memory_order_release);
}

void OpSubscription::SetActive(bool active) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_slots[slot_].active == active) return;
  g_slots[slot_].active = active;
  Publish();
}

OpStreamState CurrentOpStream() {
  std::lock_guard<std::mutex> lock(g_mutex);
  OpStreamState state;
  state.registered = g_registered;
  state.needs = g_registered ? g_needs : OpInterests{};
  for (const Slot& slot : g_slots) {
    if (slot.observer == nullptr) continue;
    ++state.subscriptions;
    if (slot.active) ++state.active;
  }
  return state;
}

}  // namespace oomguard
