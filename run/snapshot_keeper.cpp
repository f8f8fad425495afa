#include "run/snapshot_keeper.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/atomic_file.h"
#include "base/files.h"
#include "workload/snapshot_recorder.h"

namespace oomguard {
namespace {

// rename(2), or a copy when the scratch folder is on another file system than DIR.
bool MoveFile(const std::string& from, const std::string& to, std::string* error) {
  if (std::rename(from.c_str(), to.c_str()) == 0) return true;
  if (errno != EXDEV) {
    *error = "cannot move " + from + " to " + to + ": " + std::strerror(errno);
    return false;
  }
  std::string content;
  if (!ReadFile(from, &content, error) || !WriteFileAtomically(to, content, error)) return false;
  unlink(from.c_str());
  return true;
}

bool WorthKeeping(const ScenarioResult& scenario, const VariantResult& v) {
  return v.measurement->outcome.kind != Outcome::kPass || v.code != ResultCode::kPass ||
         scenario.code != ResultCode::kPass;
}

}  // namespace

void KeepSnapshots(const std::string& dir, bool all, ScenarioResult* result) {
  for (VariantResult& v : result->variants) {
    if (!v.measurement || v.measurement->snapshot.empty()) continue;
    VariantMeasurement& m = *v.measurement;
    if (!all && !WorthKeeping(*result, v)) {
      unlink(m.snapshot.c_str());
      m.snapshot.clear();
      continue;
    }
    const std::string kept = SnapshotPath(dir, result->name, v.name, result->backend);
    if (std::string error; MoveFile(m.snapshot, kept, &error)) {
      m.snapshot = kept;
    } else {
      m.snapshot.clear();
      m.snapshot_error = error;
    }
  }
}

}  // namespace oomguard
