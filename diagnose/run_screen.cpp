#include "diagnose/run_screen.h"

#include <ATen/SequenceNumber.h>
#include <torch/csrc/autograd/function.h>

#include "base/check.h"
#include "diagnose/random_ops.h"
#include "nn/checkpoint.h"

namespace oomguard {
namespace {
std::atomic<RunObserver::Screen*> g_screen{nullptr};
}  // namespace

RunObserver::Screen::Screen(Ledger& ledger)
    : ledger_(ledger),
      sequence_at_mark_(at::sequence_number::peek()),
      backward_nodes_(this, {.backward_nodes = true}),
      draws_(this, {.op_starts = true}, /*active=*/false) {
  Screen* expected = nullptr;
  OOMGUARD_CHECK(g_screen.compare_exchange_strong(expected, this)) << "only one screen may exist at a time";
  SetUnseededRecomputationListener(&WatchTheRecomputation);
}

RunObserver::Screen::~Screen() {
  SetUnseededRecomputationListener(nullptr);
  g_screen.store(nullptr, std::memory_order_release);
}

void RunObserver::Screen::WatchTheRecomputation(bool begins) {
  if (Screen* screen = g_screen.load(std::memory_order_acquire)) screen->draws_.SetActive(begins);
}

void RunObserver::Screen::OnBackwardNode(const at::RecordFunction&) {
  if (retain_grad_hook_.load(std::memory_order_relaxed)) return;
  const std::shared_ptr<torch::autograd::Node> node = torch::autograd::get_current_node();
  if (node && !node->retains_grad_hooks().empty()) retain_grad_hook_.store(true, std::memory_order_relaxed);
}

std::unique_ptr<at::ObserverContext> RunObserver::Screen::OnOpStart(const at::RecordFunction& fn) {
  if (IsRandomOp(fn.name())) random_draw_.store(true, std::memory_order_relaxed);
  return nullptr;
}

bool RunObserver::Screen::NodesMadeSinceMark() {
  const uint64_t now = at::sequence_number::peek();
  const bool made = now != sequence_at_mark_;
  sequence_at_mark_ = now;
  return made;
}

void RunObserver::Screen::Suspect(const char* why) {
  if (suspicion_.empty()) suspicion_ = why;
}

std::string RunObserver::Screen::Suspicion() const {
  if (!suspicion_.empty()) return suspicion_;
  if (retain_grad_hook_.load(std::memory_order_relaxed)) return "retained-grad";
  if (random_draw_.load(std::memory_order_relaxed)) return "checkpoint-rng";
  return "";
}

void RunObserver::Screen::AtBeginIteration() { NodesMadeSinceMark(); }

void RunObserver::Screen::AtBackwardDone() { NodesMadeSinceMark(); }

// A watch reports an evaluation that keeps nodes and bytes of its phase.
void RunObserver::Screen::AtEvalDone(int phase) {
  int64_t bytes = 0;
  for (int epoch = 0; epoch < Ledger::kEpochs; ++epoch) bytes += ledger_.LiveBytesFrom(phase, epoch);
  if (NodesMadeSinceMark() && bytes > 0) Suspect("eval");
}

// A kept graph holds bytes iteration N-1 allocated outside its state phases: a watch reports one only
// with bytes.
void RunObserver::Screen::AtEndIteration(int64_t iteration, int previous_epoch, const std::vector<bool>& state_phases) {
  NodesMadeSinceMark();
  if (iteration < 2) return;
  int64_t bytes = 0;
  for (int i = 0; i < Ledger::kMaxPhases; ++i) {
    if (!state_phases[i]) bytes += ledger_.LiveBytesFrom(i, previous_epoch);
  }
  if (bytes > 0) Suspect("kept");
}

}  // namespace oomguard
