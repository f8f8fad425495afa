#include "allocators/ledger.h"

#include <algorithm>

#include "base/check.h"

namespace oomguard {
namespace {

// Raises `target` to `value` if it is lower; returns whether it did.
bool RaiseTo(std::atomic<int64_t>& target, int64_t value) {
  int64_t seen = target.load(std::memory_order_relaxed);
  while (value > seen) {
    if (target.compare_exchange_weak(seen, value, std::memory_order_relaxed)) return true;
  }
  return false;
}

// Note [Autocast cache frees]: the open ReleaseBatch scopes of this thread, and the ledgers whose
// timeline owes an event.
thread_local int release_batch_depth = 0;
thread_local std::vector<Ledger*> ledgers_owed_an_event;

}  // namespace

Ledger::ReleaseBatch::ReleaseBatch() { ++release_batch_depth; }

Ledger::ReleaseBatch::~ReleaseBatch() {
  if (--release_batch_depth > 0) return;
  std::vector<Ledger*> owed;
  owed.swap(ledgers_owed_an_event);
  for (Ledger* ledger : owed) ledger->RecordEvent(ledger->live_bytes());
}

Ledger::Ledger() {
  for (auto& p : phase_peak_bytes_) p.store(-1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(phases_mutex_);
  PhaseIndexLocked(kInitialPhase);
  phase_peak_bytes_[0].store(0, std::memory_order_relaxed);
  phase_entry_order_.push_back(0);
}

bool Ledger::TryCharge(int64_t nbytes, int64_t limit_bytes, int* origin, Admission* also) {
  const int64_t live = live_bytes_.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  if (live > limit_bytes || (also != nullptr && !also->Admit(nbytes))) {
    live_bytes_.fetch_sub(nbytes, std::memory_order_relaxed);
    failed_count_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  alloc_count_.fetch_add(1, std::memory_order_relaxed);
  allocated_bytes_total_.fetch_add(nbytes, std::memory_order_relaxed);
  const int phase = current_phase_.load(std::memory_order_relaxed);
  const int from = current_epoch_.load(std::memory_order_relaxed) * kMaxPhases + phase;
  live_by_origin_[from].fetch_add(nbytes, std::memory_order_relaxed);
  if (origin != nullptr) *origin = from;
  RaisePeaks(live);
  if (timeline_enabled_.load(std::memory_order_relaxed)) RecordEvent(live);
  return true;
}

void Ledger::Release(int64_t nbytes, int origin) {
  if (origin >= 0 && origin < kMaxOrigins) live_by_origin_[origin].fetch_sub(nbytes, std::memory_order_relaxed);
  const int64_t live = live_bytes_.fetch_sub(nbytes, std::memory_order_relaxed) - nbytes;
  if (!timeline_enabled_.load(std::memory_order_relaxed)) return;
  if (release_batch_depth == 0) {
    RecordEvent(live);
  } else if (std::find(ledgers_owed_an_event.begin(), ledgers_owed_an_event.end(), this) ==
             ledgers_owed_an_event.end()) {
    ledgers_owed_an_event.push_back(this);
  }
}

void Ledger::RaisePeaks(int64_t live) {
  const int phase = current_phase_.load(std::memory_order_relaxed);
  if (RaiseTo(peak_bytes_, live)) {
    peak_phase_.store(phase, std::memory_order_relaxed);
    CopyOriginsToPeak();
  }
  RaiseTo(window_peak_bytes_, live);
  RaiseTo(phase_peak_bytes_[phase], live);
}

void Ledger::CopyOriginsToPeak() {
  const int phases = phase_count_.load(std::memory_order_relaxed);
  for (int i = 0; i < phases; ++i) {
    int64_t bytes = 0;
    for (int epoch = 0; epoch < kEpochs; ++epoch) {
      bytes += live_by_origin_[epoch * kMaxPhases + i].load(std::memory_order_relaxed);
    }
    peak_by_origin_[i].store(bytes, std::memory_order_relaxed);
  }
}

void Ledger::SetEpoch(int epoch) {
  OOMGUARD_CHECK(epoch >= 0 && epoch < kEpochs) << "epoch " << epoch << " is not below " << kEpochs;
  current_epoch_.store(epoch, std::memory_order_relaxed);
}

int64_t Ledger::LiveBytesFrom(int phase, int epoch) const {
  OOMGUARD_CHECK(phase >= 0 && phase < kMaxPhases && epoch >= 0 && epoch < kEpochs)
      << "no origin for phase " << phase << " in epoch " << epoch;
  return live_by_origin_[epoch * kMaxPhases + phase].load(std::memory_order_relaxed);
}

int64_t Ledger::TakeWindowPeak() { return window_peak_bytes_.exchange(live_bytes(), std::memory_order_relaxed); }

void Ledger::SetPhase(std::string_view name) {
  if (phase_listener_) phase_listener_(phase(), std::string(name));
  int index;
  {
    std::lock_guard<std::mutex> lock(phases_mutex_);
    index = PhaseIndexLocked(name);
    if (phase_peak_bytes_[index].load(std::memory_order_relaxed) < 0) {
      phase_peak_bytes_[index].store(0, std::memory_order_relaxed);
      phase_entry_order_.push_back(index);
    }
  }
  current_phase_.store(index, std::memory_order_relaxed);
  // What is live when a phase starts is live during it.
  RaiseTo(phase_peak_bytes_[index], live_bytes());
  if (timeline_enabled_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(timeline_mutex_);
    if (marks_.empty() || marks_.back().phase != name) {
      marks_.push_back({events_, std::string(name)});
      ++marks_recorded_;
      if (marks_.size() > 2 * timeline_max_points_) ThinMarksLocked();
    }
  }
}

std::string Ledger::PhaseName(int index) const {
  std::lock_guard<std::mutex> lock(phases_mutex_);
  return index >= 0 && static_cast<size_t>(index) < phase_names_.size() ? phase_names_[index] : std::string();
}

int64_t Ledger::CurrentPhaseStartEvent() const {
  if (!timeline_enabled_.load(std::memory_order_relaxed)) return -1;
  std::lock_guard<std::mutex> lock(timeline_mutex_);
  return marks_.empty() ? 0 : marks_.back().event_index;
}

std::string Ledger::phase() const {
  std::lock_guard<std::mutex> lock(phases_mutex_);
  return phase_names_[current_phase_.load(std::memory_order_relaxed)];
}

int Ledger::PhaseIndexLocked(std::string_view name) {
  auto it = std::find(phase_names_.begin(), phase_names_.end(), name);
  if (it != phase_names_.end()) return static_cast<int>(it - phase_names_.begin());
  OOMGUARD_CHECK(phase_names_.size() < kMaxPhases)
      << "more than " << kMaxPhases << " distinct phase names in one ledger";
  phase_names_.emplace_back(name);
  phase_count_.store(static_cast<int>(phase_names_.size()), std::memory_order_relaxed);
  return static_cast<int>(phase_names_.size() - 1);
}

void Ledger::EnableTimeline(size_t max_points) {
  std::lock_guard<std::mutex> lock(timeline_mutex_);
  timeline_max_points_ = std::max<size_t>(max_points, max_points ? 2 : 0);
  timeline_enabled_.store(max_points > 0, std::memory_order_relaxed);
}

void Ledger::RecordEvent(int64_t live) {
  std::lock_guard<std::mutex> lock(timeline_mutex_);
  ++events_;
  if (bucket_count_ == 0) {
    bucket_start_ = events_;
    bucket_max_ = live;
  }
  bucket_max_ = std::max(bucket_max_, live);
  if (++bucket_count_ == stride_) {
    PushPointLocked({bucket_start_, bucket_max_});
    bucket_count_ = 0;
  }
}

void Ledger::PushPointLocked(TimelinePoint point) {
  points_.push_back(point);
  if (points_.size() < timeline_max_points_) return;
  // Full: merge neighbours so each point stands for twice as many events.
  size_t out = 0;
  for (size_t i = 0; i < points_.size(); i += 2) {
    TimelinePoint merged = points_[i];
    if (i + 1 < points_.size()) merged.live_bytes = std::max(merged.live_bytes, points_[i + 1].live_bytes);
    points_[out++] = merged;
  }
  points_.resize(out);
  stride_ *= 2;
}

void Ledger::ThinMarksLocked() {
  // A mark at event_index begins with event event_index + 1, in point (event_index / stride_).
  const auto point_of = [this](const PhaseMark& mark) { return mark.event_index / stride_; };
  size_t out = 1;  // the first mark stays
  for (size_t i = 1; i < marks_.size(); ++i) {
    if (i + 1 < marks_.size() && point_of(marks_[i + 1]) == point_of(marks_[i])) continue;
    if (out != i) marks_[out] = std::move(marks_[i]);  // never onto itself: a self-moved string is empty
    ++out;
  }
  marks_.resize(out);
}

void Ledger::ResetStatistics() {
  const int64_t live = live_bytes();
  peak_bytes_.store(live, std::memory_order_relaxed);
  window_peak_bytes_.store(live, std::memory_order_relaxed);
  alloc_count_.store(0, std::memory_order_relaxed);
  allocated_bytes_total_.store(0, std::memory_order_relaxed);
  failed_count_.store(0, std::memory_order_relaxed);
  const int current = current_phase_.load(std::memory_order_relaxed);
  peak_phase_.store(current, std::memory_order_relaxed);
  CopyOriginsToPeak();
  {
    std::lock_guard<std::mutex> lock(phases_mutex_);
    for (auto& p : phase_peak_bytes_) p.store(-1, std::memory_order_relaxed);
    phase_peak_bytes_[current].store(live, std::memory_order_relaxed);
    phase_entry_order_.assign(1, current);
  }
  std::lock_guard<std::mutex> lock(timeline_mutex_);
  events_ = 0;
  stride_ = 1;
  bucket_count_ = 0;
  points_.clear();
  marks_.clear();
  marks_recorded_ = 0;
  if (timeline_max_points_ > 0) {
    points_.push_back({0, live});  // where the measurement starts
    marks_.push_back({0, phase_names_[current]});
    marks_recorded_ = 1;
  }
}

LedgerStats Ledger::Snapshot() const {
  LedgerStats stats;
  stats.live_bytes = live_bytes();
  stats.peak_bytes = peak_bytes();
  stats.alloc_count = alloc_count_.load(std::memory_order_relaxed);
  stats.allocated_bytes_total = allocated_bytes_total_.load(std::memory_order_relaxed);
  stats.failed_count = failed_count_.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(phases_mutex_);
    stats.peak_phase = phase_names_[peak_phase_.load(std::memory_order_relaxed)];
    for (int index : phase_entry_order_) {
      stats.phase_peaks.push_back({phase_names_[index], phase_peak_bytes_[index].load(std::memory_order_relaxed)});
    }
    // Phases entered since the reset first, in that order (as phase_peaks), then older origins.
    std::vector<int> order = phase_entry_order_;
    for (int index = 0; index < static_cast<int>(phase_names_.size()); ++index) {
      if (std::find(order.begin(), order.end(), index) == order.end()) order.push_back(index);
    }
    for (int index : order) {
      const int64_t bytes = peak_by_origin_[index].load(std::memory_order_relaxed);
      if (bytes != 0) stats.peak_by_origin.push_back({phase_names_[index], bytes});
    }
  }
  std::lock_guard<std::mutex> lock(timeline_mutex_);
  stats.timeline = points_;
  if (bucket_count_ > 0) stats.timeline.push_back({bucket_start_, bucket_max_});
  stats.timeline_stride = stride_;
  stats.phase_marks = marks_;
  stats.phase_marks_recorded = marks_recorded_;
  return stats;
}

}  // namespace oomguard
