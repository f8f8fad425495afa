// Ledger: byte accounting for one device, fed by that device's tracking allocator.
//
//   oomguard::Ledger ledger;
//   ledger.SetPhase("forward");
//   if (!ledger.TryCharge(4096, cap_bytes)) { /* over the cap: nothing was charged */ }
//   ledger.Release(4096);
//   oomguard::LedgerStats stats = ledger.Snapshot();  // live, peak, per-phase peaks, timeline
//
// Thread safety: every method may be called from any thread; LibTorch's intra-op threads allocate
// concurrently. TryCharge/Release are lock-free unless the timeline is enabled (then they take a
// short mutex). SetPhase, EnableTimeline and ResetStatistics are meant for the controlling thread.
//
// Note [Why cpu peaks are exact]: the ledger counts the bytes each allocation asked for, not what
// malloc or a caching allocator rounds them to, so on the cpu and meta backends a known sequence of
// tensors gives a known peak to the byte on every machine.
//
// Note [COUNT and SUM]: stats structs tag each field as c10's DeviceStats does. COUNT: a gauge, the
// value now or its peak (it goes down as well as up). SUM: cumulative since the last reset (it only
// grows). Units are in the names (_bytes, _count, _ms).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace oomguard {

struct TimelinePoint {
  int64_t event_index;  // COUNT: 1-based allocation/free event since ResetStatistics (0: the start)
  int64_t live_bytes;   // the highest live bytes over the events this point stands for
};

struct PhaseMark {
  int64_t event_index;  // events before the phase began
  std::string phase;
};

struct PhasePeak {
  std::string phase;
  int64_t peak_bytes;  // highest live bytes while this phase was current (including what it started with)
};

struct LedgerStats {
  int64_t live_bytes = 0;               // COUNT: bytes allocated and not yet freed
  int64_t peak_bytes = 0;               // COUNT: highest live_bytes since ResetStatistics
  int64_t alloc_count = 0;              // SUM: successful allocations since ResetStatistics
  int64_t allocated_bytes_total = 0;    // SUM: bytes of those allocations
  int64_t failed_count = 0;             // SUM: allocations refused by the limit or an injected fault
  std::string peak_phase;               // the phase that was current when peak_bytes was reached
  std::vector<PhasePeak> phase_peaks;   // phases entered since ResetStatistics, in order of first entry
  std::vector<TimelinePoint> timeline;  // empty unless EnableTimeline
  int64_t timeline_stride = 1;          // events per timeline point (doubles as the timeline fills)
  std::vector<PhaseMark> phase_marks;   // phase changes, for timeline plots (thinned: Note [Thinned phase marks])
  int64_t phase_marks_recorded = 0;     // phase changes since the reset, kept or thinned out
  // At peak_bytes: the live bytes by the phase that allocated them (only phases with bytes; those
  // entered since the reset first, in phase_peaks' order); they sum to peak_bytes when every release
  // named its origin.
  std::vector<PhasePeak> peak_by_origin;
};

class Ledger {
 public:
  static constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
  static constexpr int kMaxPhases = 32;
  static constexpr int kEpochs = 7;  // Note [Epochs]
  static constexpr int kMaxOrigins = kEpochs * kMaxPhases;
  static constexpr std::string_view kInitialPhase = "setup";

  Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // Charges nbytes when live + nbytes <= limit_bytes and returns true; otherwise charges nothing,
  // counts a failure and returns false. A limit is exact: reaching it is allowed, one byte more is not.
  // *origin (if given) receives the current phase and epoch: pass it back to Release, and the ledger
  // knows, at its peak, how many of the live bytes each phase allocated (Note [Live bytes by origin]).
  // It is below kMaxOrigins.
  // `also` (if given) is a second judge, asked only once the limit admits the request and before
  // anything is booked: when it refuses, the request is refused as if the limit had (nothing
  // charged, a failure counted, no peak raised). The CUDA caching allocator's model is one
  // (Note [One decision point], device_account.h).
  class Admission {
   public:
    virtual ~Admission() = default;
    virtual bool Admit(int64_t nbytes) = 0;
  };
  [[nodiscard]] bool TryCharge(int64_t nbytes, int64_t limit_bytes, int* origin = nullptr, Admission* also = nullptr);
  // A request refused before it reached TryCharge (an injected fault): counted in failed_count.
  void CountRefusal() { failed_count_.fetch_add(1, std::memory_order_relaxed); }
  static constexpr int kNoOrigin = -1;
  void Release(int64_t nbytes, int origin = kNoOrigin);

  // Names the phase that following allocations belong to ("forward", "backward", "optimizer", ...).
  // At most kMaxPhases distinct names per ledger.
  void SetPhase(std::string_view name);

  // Called by SetPhase, on its thread, with the phase that ends and the one that starts, before the
  // switch (the cuda backend reads the caching allocator's per-phase peaks there). Not thread-safe:
  // set it before a run and clear it (an empty function) after.
  using PhaseListener = std::function<void(const std::string& ending, const std::string& starting)>;
  void SetPhaseListener(PhaseListener listener) { phase_listener_ = std::move(listener); }
  std::string phase() const;
  // The current phase as an index (cheap: one atomic load), and an index's name; for observers that
  // tag what they see per event and name it later.
  int phase_index() const { return current_phase_.load(std::memory_order_relaxed); }
  std::string PhaseName(int index) const;

  // Note [Epochs]: allocations are tagged with the epoch current when they were made as well as the
  // phase, so an observer that moves to a new epoch at each iteration can ask, without watching any
  // operator, what bytes an earlier iteration made and still holds (diagnose/run_observer.h). Epoch 0
  // is what came before. An observer alternates two more, since what an iteration older than the
  // previous one left alive was alive, and seen, at the previous one's end; it takes a pair that holds
  // no live bytes, of three, so that tensors an earlier run of the process left alive (a test's static)
  // are not taken for its own.
  void SetEpoch(int epoch);
  int epoch() const { return current_epoch_.load(std::memory_order_relaxed); }
  // Bytes allocated under `phase` (an index) in `epoch`, and not yet freed.
  int64_t LiveBytesFrom(int phase, int epoch) const;
  // The timeline's event index at which the current phase began (the last phase mark); -1 without a
  // timeline.
  int64_t CurrentPhaseStartEvent() const;

  // Keeps at most max_points (event index, live bytes) points; 0 turns the timeline off. When full,
  // neighbouring points merge (keeping the higher live bytes), so the whole run stays visible and
  // no peak is lost.
  //
  // Note [Thinned phase marks]
  // Phase marks are bounded too: a run of 100000 iterations changes phase 400000 times, 11 MB of
  // measurement that no plot can show. When there are more than twice max_points marks, a mark is
  // kept only where it is the last to begin within its timeline point (the phase current at that
  // point's end), and the first mark always: a band narrower than one point is not drawn anyway. So
  // marks stay about as many as points, the last mark (the current phase) stays, and
  // phase_marks_recorded says how many there were. The catalog's runs have a few dozen marks.
  void EnableTimeline(size_t max_points);

  // Starts a new measurement: peak = live, counters, phase peaks and timeline cleared. Live bytes
  // stay, because the tensors they stand for are still alive.
  void ResetStatistics();

  // The highest live bytes since the previous call (or ResetStatistics), then starts a new window at
  // the current live bytes. The runner calls it once per iteration for per-iteration peaks.
  int64_t TakeWindowPeak();

  int64_t live_bytes() const { return live_bytes_.load(std::memory_order_relaxed); }
  int64_t alloc_count() const { return alloc_count_.load(std::memory_order_relaxed); }  // SUM, since the reset
  int64_t peak_bytes() const { return peak_bytes_.load(std::memory_order_relaxed); }
  LedgerStats Snapshot() const;

  // Frees on this thread while a ReleaseBatch lives are booked at once (live bytes) but reach each
  // ledger's timeline as one event, when the outermost batch ends: for frees whose order no program
  // decides, such as LibTorch's autocast cache, which clear_cache() empties in the order of a hash
  // map keyed by addresses (Note [Autocast cache frees], nn/autocast/autocast.cpp). Frees never raise a peak,
  // so only the timeline could differ from run to run.
  class ReleaseBatch {
   public:
    ReleaseBatch();
    ~ReleaseBatch();
    ReleaseBatch(const ReleaseBatch&) = delete;
    ReleaseBatch& operator=(const ReleaseBatch&) = delete;
  };

 private:
  void RaisePeaks(int64_t live);
  void CopyOriginsToPeak();
  void RecordEvent(int64_t live);  // timeline only; called with timeline enabled
  void PushPointLocked(TimelinePoint point);
  void ThinMarksLocked();
  int PhaseIndexLocked(std::string_view name);

  alignas(64) std::atomic<int64_t> live_bytes_{0};
  alignas(64) std::atomic<int64_t> peak_bytes_{0};
  std::atomic<int64_t> window_peak_bytes_{0};
  std::atomic<int64_t> alloc_count_{0};
  std::atomic<int64_t> allocated_bytes_total_{0};
  std::atomic<int64_t> failed_count_{0};
  std::atomic<int> current_phase_{0};
  std::atomic<int> current_epoch_{0};
  std::atomic<int> phase_count_{0};  // phase_names_.size(), readable without the mutex
  std::atomic<int> peak_phase_{0};
  std::array<std::atomic<int64_t>, kMaxPhases> phase_peak_bytes_;  // -1: not entered since reset
  // Note [Live bytes by origin]: live bytes by the phase (and epoch) that allocated them, and a copy
  // by phase taken at each new peak: "at the peak, 12 GiB were parameters (setup), 3 GiB activations
  // (forward), ...". Origin epoch * kMaxPhases + phase.
  std::array<std::atomic<int64_t>, kMaxOrigins> live_by_origin_{};
  std::array<std::atomic<int64_t>, kMaxPhases> peak_by_origin_{};

  mutable std::mutex phases_mutex_;
  std::vector<std::string> phase_names_;  // index -> name; guarded by phases_mutex_
  std::vector<int> phase_entry_order_;    // guarded by phases_mutex_

  PhaseListener phase_listener_;
  std::atomic<bool> timeline_enabled_{false};
  mutable std::mutex timeline_mutex_;  // guards everything below
  size_t timeline_max_points_ = 0;
  int64_t events_ = 0;
  int64_t stride_ = 1;
  int64_t bucket_start_ = 0;
  int64_t bucket_max_ = 0;
  int64_t bucket_count_ = 0;
  std::vector<TimelinePoint> points_;
  std::vector<PhaseMark> marks_;
  int64_t marks_recorded_ = 0;
};

}  // namespace oomguard
