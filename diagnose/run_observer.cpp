#include "diagnose/run_observer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>
#include <unordered_set>

#include "base/check.h"
#include "diagnose/run_observer_state.h"
#include "diagnose/run_screen.h"
#include "diagnose/run_watch.h"

namespace oomguard {

RunObserver::RunObserver(Ledger& ledger, const LayerTrace* trace, c10::DeviceType device, Mode mode)
    : state_(std::make_unique<State>(ledger, trace, &observations_)) {
  state_->device = device;
  OOMGUARD_CHECK(Watch::Attach(state_.get())) << "only one RunObserver may exist at a time";
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
  Watch::Detach();
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
