// The one protocol between the runner and a measuring child: what to measure, as a MeasureRequest,
// spelled as the child's command line and read back here, both from one list of fields.
//
//   // the parent (run/runner.cpp)
//   const MeasureRequest request = MeasureRequestFor(options, file, "base", "cpu", scratch, scratch + "/0.json");
//   request.variant_file = scratch + "/0.variant.json";  // VariantSpec::document, written by the runner
//   spec.argv = ChildArgv(self_exe, request);  // SELF __measure --scenario FILE --variant base ...
//   // the child (cli's `__measure`, run/measure_child.h)
//   MeasureRequest request;
//   if (!ParseMeasureRequest(args_after_measure, &request, &error)) return kExitUsage;
//
// Note [One list of fields]: child_protocol.cpp names every field of MeasureRequest once, with its
// flag, through a structured binding of the whole struct: a field added to MeasureRequest but not to
// that list does not compile, and the writer and the reader both walk the list, so a child cannot miss
// a flag its parent set. A run flag a child needs is one field here plus one line in
// MeasureRequestFor. The command line (rather than a request file) keeps a spawned child reproducible
// by hand: `ps` shows what it was asked, and without --variant-file (a scratch file gone once the run
// ends) it loads --scenario as a user would. A child forked warm (Note [Warm children], run/runner.cpp)
// gets the same request as a value, with its variant already resolved, and parses nothing.
//
// Spelling: a string is `--flag VALUE`, left out when empty; an integer `--flag N`, left out when 0;
// a bool `--flag`, left out when false; a list `--flag VALUE` once per element.
// Error policy: ParseMeasureRequest returns false with a one-line message for a command line it does
// not understand (the child then exits kExitUsage, and the parent reports the variant UNRESOLVED with
// the child's stderr). ChildArgv checks (OOMGUARD_CHECK) that the required fields are set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "run/run_options.h"

namespace oomguard {

// The hidden subcommand a child runs: `oomguard __measure ...`.
inline constexpr const char* kMeasureCommand = "__measure";

struct MeasureRequest {
  std::string scenario_file;  // --scenario (required)
  std::string variant;        // --variant (required)
  // --variant-file: the variant as the runner resolved it, a scenario of that variant alone
  // (VariantSpec::document, Note [Parse once]); the child loads this, and --scenario then only names the
  // scenario file in messages and snapshots. Empty: the child loads --scenario and finds --variant.
  std::string variant_file;
  std::string backend;              // --backend (required): a Name(Backend), already resolved
  std::string card;                 // --card: the run's --card (empty: the scenario's default)
  std::string cap;                  // --cap: the run's --cap
  std::string context;              // --context
  std::vector<std::string> inject;  // --inject, once per spec
  int64_t iterations = 0;           // --iterations (0: the variant's own)
  std::string snapshot_dir;         // --snapshot-dir: record the allocation history into this folder
  bool snapshot_all = false;        // --snapshot-all: write a snapshot whatever the outcome
  bool model_cuda = false;          // --model-cuda
  std::string verdict;              // --verdict: reserved or allocated (empty: reserved)
  std::string kernels;              // --kernels: cpu or cuda (empty: cpu's; Note [Kernels of a meta run])
  std::string alloc_conf;           // --alloc-conf: the resolved allocator settings (empty: PyTorch's defaults)
  bool diagnose = false;            // --diagnose: measure the fixes of what the detectors find
  std::string out_path;             // --out (required): where the measurement JSON goes
  int64_t parent_pid = 0;           // --parent-pid: the runner; the child dies with it (measure_child.cpp)
  // --ranks-store: this child is one of the variant's real ranks (Note [Real ranks on cpu],
  // workload/parallel/rank_group.h), joined through this FileStore; empty: one process, as before.
  std::string ranks_store;
  int64_t rank = 0;              // --rank: which of them (with --ranks-store)
  int64_t ranks_timeout_ms = 0;  // --ranks-timeout-ms: the store's and gloo's timeout (0: rank_group.h's)

  bool operator==(const MeasureRequest&) const = default;
};

// The request for one variant of a run: the run's flags, the resolved backend, and the scratch
// folder's files. With --snapshot-dir every child records into scratch_dir and writes a snapshot
// whatever happens; the parent keeps the ones worth keeping once the scenario is judged
// (run/snapshot_keeper.h).
MeasureRequest MeasureRequestFor(const RunOptions& options, const std::string& scenario_file,
                                 const std::string& variant, const std::string& backend, const std::string& scratch_dir,
                                 const std::string& out_path);

// {self_exe, "__measure", flags...}.
std::vector<std::string> ChildArgv(const std::string& self_exe, const MeasureRequest& request);

// Reads the arguments after `__measure`. Fails with "unknown argument 'X'", "--flag needs a value",
// "--iterations: 'X' is not a whole number" or "missing --scenario" (the first required field missing).
[[nodiscard]] bool ParseMeasureRequest(const std::vector<std::string>& args, MeasureRequest* request,
                                       std::string* error);

}  // namespace oomguard
