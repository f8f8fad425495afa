// Baselines: the memory numbers a scenario's variants are expected to keep, stored one file per
// scenario (BASELINES_DIR/<scenario>.json), human-readable and diff-friendly (sorted keys, entries
// sorted by variant, backend and cap, two-space indent), committed next to the catalog.
//
//   BaselineFile file;
//   if (!LoadBaselineFile(BaselinePath(dir, "forgotten-no-grad"), &file, &error)) { ... }
//   const BaselineEntry* entry = file.Find("pitfall", "cpu", cap_bytes);
//
// Tolerance lives in the file too ("tolerance": {"relative": 0.01, "absolute_bytes": 0}) and survives
// --update-baselines; the default is exact, since cpu and meta bytes are deterministic.
// Error policy: a missing file is not an error (exists = false); a corrupt one is, with file:line:col
// or the JSON path of the problem.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/measurement.h"

namespace oomguard {

struct Tolerance {
  double relative = 0;                      // fraction of the baseline value
  int64_t absolute_bytes = 0;               // allowed whatever the baseline (counts use it as a count)
  int64_t Allowed(int64_t baseline) const;  // max(absolute, relative * baseline)
};

struct BaselineEntry {
  std::string variant;
  std::string backend;
  std::string card;  // display only; entries are keyed by cap_bytes
  // Part of the key: empty for cpu's kernels (every file written before the field was), else a meta run's
  // mirrored kernels, "cuda sm_75" (`--kernels cuda`): numbers of other kernels are never compared.
  std::string kernels;
  // Part of the key: empty for one process (every file written before the field was), else the rank
  // the numbers are of, "fsdp rank 0 of 8, param_dtype bfloat16, reduce_dtype float32" (BaselineParallel):
  // a variant measured at another world, strategy, rank or precision has no entry yet, never a diff.
  std::string parallel;
  int64_t cap_bytes = 0;
  int64_t peak_bytes = 0;
  std::map<std::string, int64_t> phase_peaks;  // phase -> bytes
  std::vector<int64_t> live_after;             // per iteration
  int64_t alloc_count = 0;
  // Real ranks (cpu, Note [Real ranks on cpu]): every rank's peak, by rank, beside the variant's own
  // (the scenario's rank's); compared rank by rank as rank_peak[R]. Empty, and absent from the file,
  // for a run of one process or one simulated rank.
  std::vector<int64_t> rank_peaks;
};

struct BaselineFile {
  std::string scenario;
  std::string oomguard_version;
  std::string libtorch_version;
  Tolerance tolerance;
  std::map<std::string, Tolerance> metric_tolerances;  // e.g. "alloc_count" -> looser
  std::vector<BaselineEntry> entries;
  bool exists = false;  // false: no file yet

  const BaselineEntry* Find(const std::string& variant, const std::string& backend, int64_t cap_bytes,
                            const std::string& kernels = "", const std::string& parallel = "") const;
  // Replaces the entry with the same key, or adds it.
  void Put(BaselineEntry entry);
  const Tolerance& ToleranceFor(const std::string& metric) const;
};

std::string BaselinePath(const std::string& dir, const std::string& scenario);
// Where a scenario's baseline file lives: `baselines_dir` (--baselines DIR) when given, else
// baselines/ beside the scenario file.
std::string BaselineDirectory(const std::string& baselines_dir, const std::string& scenario_file);

// Nothing at `path` is no baseline yet (file->exists false); a file that cannot be read, or holds a
// value out of place or range, is an error naming the path and the JSON path.
[[nodiscard]] bool LoadBaselineFile(const std::string& path, BaselineFile* file, std::string* error);
// The baseline file of `scenario` in `dir` (BaselinePath), as LoadBaselineFile reads it, that must also
// say it is that scenario's: a "scenario" of another name is an error at the JSON path "scenario".
[[nodiscard]] bool LoadScenarioBaseline(const std::string& dir, const std::string& scenario, BaselineFile* file,
                                        std::string* error);
// The same for text already in memory; `path` names it in messages.
[[nodiscard]] bool LoadBaselineText(const std::string& text, const std::string& path, BaselineFile* file,
                                    std::string* error);
std::string SerializeBaselineFile(const BaselineFile& file);

BaselineEntry EntryFromMeasurement(const VariantMeasurement& m);
// The parallel part of m's baseline key (BaselineEntry::parallel): empty without m.parallel, else its
// strategy (if any), rank, world and the precision it names.
std::string BaselineParallel(const VariantMeasurement& m);

// The kernels part of m's baseline key (BaselineEntry::kernels): m.kernels for a meta run that mirrored
// other kernels than cpu's, else empty.
std::string BaselineKernels(const VariantMeasurement& m);

}  // namespace oomguard
