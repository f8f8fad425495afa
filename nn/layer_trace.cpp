#include "nn/layer_trace.h"

#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>

#include "base/check.h"
#include "ops/op_stream.h"

namespace oomguard {
namespace {

// The backward node that started last: the engine may run it on a worker thread.
std::mutex g_node_mutex;
std::string g_node_name;          // guarded by g_node_mutex
int64_t g_node_sequence_nr = -1;  // guarded by g_node_mutex
std::atomic<bool> g_active{false};
std::atomic<const LayerTrace*> g_listening{nullptr};  // the trace with a location listener, if any

}  // namespace

struct LayerTrace::BackwardNodes final : OpObserver {
  BackwardNodes() : subscription(this, {.backward_nodes = true}) {}

  void OnBackwardNode(const at::RecordFunction& fn) override {
    {
      std::lock_guard<std::mutex> lock(g_node_mutex);
      g_node_name = fn.name();
      g_node_sequence_nr = fn.seqNr();
    }
    if (const LayerTrace* trace = g_listening.load(std::memory_order_acquire))
      trace->ReportBackwardNode(fn.name(), fn.seqNr());
  }

  OpSubscription subscription;
};

namespace {

std::string BackwardPhrase(const std::string& owner, const std::string& node) {
  return owner.empty() ? "the backward node " + node : "the backward of " + owner + ", node " + node;
}

// Bounds the record on long runs; the oldest starts name nodes long since run.
constexpr size_t kMaxStarts = 1 << 16;

}  // namespace

LayerTrace::LayerTrace() {
  OOMGUARD_CHECK(!g_active.exchange(true)) << "only one LayerTrace may exist at a time";
  {
    std::lock_guard<std::mutex> lock(g_node_mutex);
    g_node_name.clear();
    g_node_sequence_nr = -1;
  }
  backward_nodes_ = std::make_unique<BackwardNodes>();
}

LayerTrace::~LayerTrace() {
  g_listening = nullptr;
  backward_nodes_.reset();
  g_active = false;
}

void LayerTrace::EnterLayer(const std::string& layer) { Enter("layer " + layer, /*is_forward=*/true); }
void LayerTrace::EnterForward(const std::string& what) { Enter(what, /*is_forward=*/true); }
void LayerTrace::EnterStage(const std::string& stage) { Enter(stage, /*is_forward=*/false); }

// Note [Nodes made between brackets]: an Exit is recorded as a start of nobody, so a node made after
// it (by code between the brackets, or by a forward nothing brackets) is not the last bracket's. Without
// it, a module that runs whole made every node of iteration 2 "the optimizer step"'s: the step was the
// last bracket entered before that forward, and its sequence number was below all of them.
void LayerTrace::Record(std::string what) {
  if (starts_.size() >= kMaxStarts) starts_.erase(starts_.begin(), starts_.begin() + kMaxStarts / 2);
  starts_.push_back({at::sequence_number::peek(), std::move(what)});
}

void LayerTrace::Enter(std::string what, bool is_forward) {
  current_ = (is_forward ? "the forward of " : "") + what;
  moves_.fetch_add(1, std::memory_order_release);
  Record(std::move(what));
  {
    std::lock_guard<std::mutex> lock(g_node_mutex);
    g_node_name.clear();  // a node that ran before this point is not what fails next
    g_node_sequence_nr = -1;
  }
  if (listener_) listener_(current_);
}

void LayerTrace::Exit() {
  current_.clear();
  moves_.fetch_add(1, std::memory_order_release);
  Record("");
  if (listener_) listener_(current_);
}

void LayerTrace::SetLocationListener(LocationListener listener) {
  listener_ = std::move(listener);
  g_listening.store(listener_ ? this : nullptr, std::memory_order_release);
}

void LayerTrace::ReportBackwardNode(const std::string& name, int64_t sequence_nr) const {
  if (listener_) listener_(BackwardPhrase(OwnerOfNode(sequence_nr), name));
}

std::string LayerTrace::OwnerOfNode(int64_t sequence_nr) const {
  if (sequence_nr < 0) return "";
  const auto after = std::upper_bound(starts_.begin(), starts_.end(), static_cast<uint64_t>(sequence_nr),
                                      [](uint64_t nr, const Start& start) { return nr < start.first_sequence_nr; });
  return after == starts_.begin() ? "" : std::prev(after)->what;
}

std::string LayerTrace::Locate() const {
  if (!current_.empty()) return "in " + current_;
  std::lock_guard<std::mutex> lock(g_node_mutex);
  if (g_node_name.empty()) return "";
  return "in " + BackwardPhrase(OwnerOfNode(g_node_sequence_nr), g_node_name);
}

}  // namespace oomguard
