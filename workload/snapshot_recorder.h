// Records one variant's allocation history and writes the memory_viz snapshot of it
// (`oomguard run --snapshot-dir DIR`).
//
//   oomguard::SnapshotOptions options;
//   options.path = "snaps/x.pitfall.cpu.pickle";
//   options.source = {"scenarios/x.json", "x", "pitfall", "cpu", cap_bytes};
//   oomguard::SnapshotRecorder recorder(options, backend, layer_trace);  // recording from here
//   ... run the variant, catching its failure into m ...
//   recorder.Finish(&m);   // written when m.outcome is not "pass" (or always): m.snapshot = path
//
// `oomguard run` has every child write (always) into its scratch folder and keeps what the verdicts
// ask for (run/snapshot_keeper.h).
//
// The backend's own history where it keeps one (BackendSession::StartOwnHistory; cuda: PyTorch's
// history and pickle, with its C++ stacks as frames); else, on cpu and meta, the account's
// AllocationTrace (allocators/allocation_trace.h), with frames naming phase and layer
// (memviz/memory_viz_snapshot.h).
//
// Error policy: a snapshot that cannot be written is not the variant's failure: Finish fills
// m->snapshot_error and the measurement stands.
#pragma once

#include <string>

#include "allocators/allocation_trace.h"
#include "backends/backend.h"
#include "memviz/memory_viz_snapshot.h"
#include "model/measurement.h"
#include "nn/layer_trace.h"

namespace oomguard {

struct SnapshotOptions {
  std::string path;     // where the pickle goes; empty: record nothing
  bool always = false;  // write it for passing variants too (--snapshot-all)
  SnapshotSource source;
  size_t max_events = AllocationTrace::kDefaultMaxEvents;  // Note [Bounded trace]
};

class SnapshotRecorder {
 public:
  // Starts recording when options.path is set. `layers` must outlive the recorder.
  SnapshotRecorder(const SnapshotOptions& options, BackendSession& backend, LayerTrace& layers);
  ~SnapshotRecorder();  // stops recording
  SnapshotRecorder(const SnapshotRecorder&) = delete;
  SnapshotRecorder& operator=(const SnapshotRecorder&) = delete;

  // After the run: writes the snapshot (atomically) if the outcome asks for one.
  void Finish(VariantMeasurement* m);

 private:
  std::string Pickled() const;

  const SnapshotOptions& options_;
  BackendSession& backend_;
  LayerTrace& layers_;
  bool recording_ = false;
  bool own_history_ = false;  // the backend records (StartOwnHistory said so)
};

// DIR/<scenario>.<variant>.<backend>.pickle, with characters other than letters, digits, '-' and '_'
// in the names made '_' (a variant may be called `bad&name<"x">`).
std::string SnapshotPath(const std::string& dir, const std::string& scenario, const std::string& variant,
                         const std::string& backend);

}  // namespace oomguard
