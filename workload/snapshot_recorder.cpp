#include "workload/snapshot_recorder.h"

#include <cctype>

#include "base/atomic_file.h"

namespace oomguard {
namespace {

std::string FileNamePart(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return out;
}

}  // namespace

std::string SnapshotPath(const std::string& dir, const std::string& scenario, const std::string& variant,
                         const std::string& backend) {
  return dir + "/" + FileNamePart(scenario) + "." + FileNamePart(variant) + "." + FileNamePart(backend) + ".pickle";
}

SnapshotRecorder::SnapshotRecorder(const SnapshotOptions& options, BackendSession& backend, LayerTrace& layers)
    : options_(options), backend_(backend), layers_(layers) {
  if (options_.path.empty()) return;
  recording_ = true;
  own_history_ = backend_.StartOwnHistory(options_.max_events);
  if (own_history_) return;
  AllocationTrace& trace = backend_.account().trace();
  trace.Enable(options_.max_events);
  layers_.SetLocationListener([&trace](const std::string& location) { trace.SetLocation(location); });
}

SnapshotRecorder::~SnapshotRecorder() {
  if (!recording_) return;
  if (own_history_) {
    backend_.StopOwnHistory();
    return;
  }
  layers_.SetLocationListener({});
  backend_.account().trace().Disable();
}

std::string SnapshotRecorder::Pickled() const {
  if (own_history_) return backend_.OwnHistoryPickle();
  return MemoryVizPickle(backend_.account().trace().Record(), options_.source);
}

void SnapshotRecorder::Finish(VariantMeasurement* m) {
  if (!recording_ || (m->outcome.kind == Outcome::kPass && !options_.always)) return;
  std::string error;
  if (WriteFileAtomically(options_.path, Pickled(), &error)) {
    m->snapshot = options_.path;
  } else {
    m->snapshot_error = error;
  }
}

}  // namespace oomguard
