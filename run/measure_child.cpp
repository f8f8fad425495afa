#include "run/measure_child.h"

#include <ATen/Parallel.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>

#include "base/atomic_file.h"
#include "base/did_you_mean.h"
#include "base/exit_codes.h"
#include "base/json_text.h"
#include "model/backend.h"
#include "model/measurement_json.h"
#include "run/measured_fix.h"
#include "run/rank_children.h"
#include "run/rank_inject.h"
#include "scenario/scenario_loader.h"
#include "workload/parallel/rank_group.h"
#include "workload/snapshot_recorder.h"
#include "workload/workload.h"

namespace oomguard {

namespace {

// A child must not outlive its runner (killed with SIGKILL, say): the kernel kills it when the parent
// goes, and a parent gone before this line is caught by comparing the pids.
bool DieWithParent(int64_t parent_pid) {
  if (parent_pid == 0) return true;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  return getppid() == static_cast<pid_t>(parent_pid);
}

// Both ways in, once the variant is resolved.
int MeasureResolvedVariant(const Scenario& scenario, const VariantSpec& resolved, const MeasureRequest& request,
                           std::ostream& err) {
  std::string error;
  // Note [Real ranks on cpu] (workload/parallel/rank_group.h): this child is one rank of the variant's.
  VariantSpec variant = resolved;
  const bool real_rank = !request.ranks_store.empty();
  if (real_rank) {
    variant.parallel.rank = request.rank;
    RealRanks ranks{request.ranks_store, variant.parallel.world, request.rank};
    if (request.ranks_timeout_ms > 0) ranks.timeout = std::chrono::milliseconds(request.ranks_timeout_ms);
    JoinRealRanks(ranks);
  }
  // One intra-op thread: some kernels allocate per-thread buffers, and exact bytes must not depend on
  // the machine's core count.
  at::set_num_threads(1);
  RunOptions flags;
  flags.card = request.card;
  flags.cap = request.cap;
  flags.context = request.context;
  flags.inject = InjectionForRank(request.inject, variant.parallel.rank);  // Note [Injection per rank]
  flags.kernels = request.kernels;
  Limits limits;
  if (!ScenarioLimits(flags, scenario, &limits, &error)) {
    err << error << "\n";
    return kExitUsage;
  }
  VariantMeasureOptions measure;
  if (!Parse(request.backend, &measure.backend)) {
    err << "--backend " << request.backend << ": not a backend (" << JoinNames(AllNames<Backend>(), ", ") << ")\n";
    return kExitUsage;
  }
  measure.limits = limits;
  if (real_rank) measure.limits.device = RankDevice(TraitsOf(measure.backend), request.rank);  // cuda: cuda:r
  if (!ScenarioKernelTarget(flags, scenario, &measure.kernels, &measure.kernels_warning, &error)) {
    err << error << "\n";
    return kExitUsage;
  }
  measure.iterations = request.iterations;
  measure.model_cuda = ModelCudaFor(request.verdict.empty() ? kVerdictReserved : request.verdict, request.model_cuda);
  std::string alloc_conf;
  if (!ResolveAllocConf(request.alloc_conf, &alloc_conf, &measure.alloc_conf, &error)) {
    err << error << "\n";
    return kExitUsage;
  }
  if (!request.snapshot_dir.empty()) {
    // Each rank's own file: the ranks of a variant record at once.
    const std::string name = real_rank ? request.variant + ".rank" + std::to_string(request.rank) : request.variant;
    measure.snapshot.path = SnapshotPath(request.snapshot_dir, scenario.name, name, request.backend);
    measure.snapshot.always = request.snapshot_all;
    measure.snapshot.source = {request.scenario_file, scenario.name, request.variant, request.backend,
                               limits.cap_bytes};
  }
  VariantMeasurement m = MeasureVariant(variant, measure);
  if (request.diagnose) MeasureFixes(variant, measure, &m);
  if (variant.parallel.rank == 0) {  // the headline rank says it once (Note [Injection per rank])
    for (std::string& w : InjectionForNoRank(request.inject, variant.parallel.world)) m.warnings.push_back(std::move(w));
  }
  if (!m.input_error.empty()) {  // the workload and its scenario disagree: the parent's UNRESOLVED
    err << request.scenario_file << ": " << m.input_error << "\n";
    return kExitUsage;
  }
  // A measurement that cannot be written is the machine's failure, not the input's (kExitUsage is):
  // "cannot write /tmp/.../0.json: No space left on device" on stderr, which the parent shows.
  if (!WriteFileAtomically(request.out_path, DumpJson(MeasurementToJson(m)), &error)) {
    err << error << "\n";
    return kExitOutputFailed;
  }
  return real_rank && m.outcome != VariantOutcome::Pass() ? kExitRankFailed : kExitOk;
}

}  // namespace

int MeasureInChild(const MeasureRequest& request, std::ostream& err) {
  if (!DieWithParent(request.parent_pid)) return kExitUsage;
  // Note [Parse once]: the runner's resolved variant when it gave one, else the file, as a user would.
  const std::string& file = request.variant_file.empty() ? request.scenario_file : request.variant_file;
  Scenario scenario;
  std::string error;
  if (!LoadScenarioFile(file, &scenario, &error)) {
    err << error << "\n";
    return kExitUsage;
  }
  const VariantSpec* spec = nullptr;
  for (const VariantSpec& v : scenario.variants) {
    if (v.name == request.variant) spec = &v;
  }
  if (spec == nullptr) {
    err << "no variant '" << request.variant << "' in " << file << "\n";
    return kExitUsage;
  }
  return MeasureResolvedVariant(scenario, *spec, request, err);
}

int MeasureForkedVariant(const Scenario& scenario, const VariantSpec& spec, const MeasureRequest& request,
                         std::ostream& err) {
  if (!DieWithParent(request.parent_pid)) return kExitUsage;
  return MeasureResolvedVariant(scenario, spec, request, err);
}

}  // namespace oomguard
