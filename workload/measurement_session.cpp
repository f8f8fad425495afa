#include "workload/measurement_session.h"

#include <optional>
#include <string>
#include <utility>

#include "allocators/cuda_model_feed.h"
#include "backends/backend.h"
#include "backends/host_scalars.h"
#include "backends/meta/cublas_workspace.h"
#include "base/host_memory.h"
#include "model/outcome.h"
#include "model/phase.h"
#include "nn/layer_trace.h"
#include "workload/error_category.h"
#include "workload/measured_run.h"
#include "workload/snapshot_recorder.h"
#include "workload/transfer_counter.h"
#include "workload/unmirrored_op_warnings.h"

namespace oomguard {
namespace {

CudaModelMeasurement CudaModelMeasurementOf(const CudaModelFeed& feed) {
  const CachingAllocatorModelStats s = feed.stats();
  const CudaModelFeed::AtStart at_start = feed.at_start();
  return {s.allocated_bytes.peak,
          s.reserved_bytes.peak,
          s.requested_bytes.peak,
          s.segments.peak,
          s.num_alloc_retries,
          s.num_ooms,
          feed.role() == ModelRole::kDecides,
          at_start.allocated_bytes,
          at_start.reserved_bytes};
}

// The allocator settings the run was given that the model does not follow (pinned_*, backend, ...).
std::string UnmodelledKeysWarning(const CachingAllocatorConfig& config) {
  std::string keys;
  for (const std::string& key : config.unmodelled_keys) keys += (keys.empty() ? "" : ", ") + key;
  return "the allocator config sets " + keys +
         ", which the model of the CUDA caching allocator ignores: its reserved bytes leave them out";
}

Limits Bounded(const VariantMeasureOptions& options) {
  Limits bounded = options.limits;
  if (TraitsOf(options.backend).allocates_host_memory) bounded.host_budget_bytes = ReadHostMemory().available_bytes;
  return bounded;
}

// The kernels a meta measurement mirrors: the options' card when they name one, else whatever the process
// has set (cpu's unless a caller holds a ScopedKernelTarget around the measurement).
KernelTarget TargetFor(const VariantMeasureOptions& options) {
  return options.backend == Backend::kMeta && options.kernels.cuda() ? options.kernels : CurrentKernelTarget();
}

// What m.kernels says (VariantMeasurement::kernels), once the session has set the target.
std::string KernelsOf(const VariantMeasureOptions& options) {
  if (options.backend == Backend::kMeta) return Describe(CurrentKernelTarget());
  return options.backend == Backend::kCuda ? "cuda" : "cpu";
}

}  // namespace

// In the order MeasureOnce declared them: destroyed in reverse, so the limits go last.
struct MeasurementSession::Parts {
  Parts(const VariantMeasureOptions& options, RunObserver::Mode mode, VariantMeasurement* m)
      : options(options),
        m(*m),
        kernels(TargetFor(options)),
        backend(GetBackend(options.backend).Open(options.limits)),
        account(backend->account()),
        limits(account, Bounded(options)) {
    // With the limits on, before anything watches the ledger.
    account.ledger().EnableTimeline(options.timeline_points);
    account.ledger().SetPhase(Name(Phase::kSetup));  // Note [Phases as names in the ledger]
    account.ledger().ResetStatistics();
    backend->BeginMeasurement();
    transfers.emplace(&account.ledger(), backend->device().type());
    if (options.diagnose) observer.emplace(account.ledger(), &trace, backend->device().type(), mode);
    snapshot.emplace(options.snapshot, *backend, trace);
    // Before the run's tensors, so that they are freed while it is still attached.
    if (options.model_cuda != ModelCuda::kOff && !backend->traits().has_caching_allocator) {
      model_feed.emplace(options.limits.cap_bytes, options.alloc_conf,
                         options.model_cuda == ModelCuda::kVerdict ? ModelRole::kDecides : ModelRole::kPredicts);
      // A card's cuBLAS workspaces, held from the start outside the ledger (Note [cuBLAS workspaces held
      // from the start]); none unless this is meta with a card's kernels.
      if (options.backend == Backend::kMeta) {
        for (const int64_t bytes : CublasWorkspacesHeldFromStart(CurrentKernelTarget())) model_feed->HoldFromStart(bytes);
      }
      attach_model.emplace(account, &*model_feed);
    }
    if (backend->traits().books_host_scalars) host_scalars.emplace();  // Note [Host scalars]
  }

  const VariantMeasureOptions& options;
  VariantMeasurement& m;
  ScopedKernelTarget kernels;  // before any tensor: Note [Meta as a card]
  const std::unique_ptr<BackendSession> backend;
  DeviceAccount& account;
  ScopedLimits limits;
  std::optional<TransferCounter> transfers;
  LayerTrace trace;
  std::optional<RunObserver> observer;  // Note [What each detector counts], diagnose/detectors.h
  std::optional<SnapshotRecorder> snapshot;
  std::optional<CudaModelFeed> model_feed;
  std::optional<ScopedModelFeed> attach_model;
  std::optional<HostScalarCopies> host_scalars;
};

MeasurementSession::MeasurementSession(const VariantSpec& spec, const VariantMeasureOptions& options,
                                       RunObserver::Mode mode, VariantMeasurement* m) {
  m->variant = spec.name;
  m->backend = Name(options.backend);
  m->card = options.limits.card;
  m->cap_bytes = options.limits.cap_bytes;
  (void)TakeKernelWarnings();  // an earlier measurement's, if it ended without taking them
  (void)TakeUnmirroredOps();
  parts_ = std::make_unique<Parts>(options, mode, m);
  m->kernels = KernelsOf(options);
}

MeasurementSession::~MeasurementSession() = default;

const BackendSession& MeasurementSession::backend() const { return *parts_->backend; }
LayerTrace* MeasurementSession::trace() { return &parts_->trace; }
RunObserver* MeasurementSession::observer() { return parts_->observer ? &*parts_->observer : nullptr; }

void MeasurementSession::RecordFailure(const std::exception& e, const MeasuredRun* run) {
  VariantMeasurement& m = parts_->m;
  const VariantMeasureOptions& options = parts_->options;
  m.outcome = OutcomeOfException(e);
  m.error = DescribeError(e, parts_->trace.Locate());
  if (m.outcome.kind != Outcome::kOom) return;
  const DeviceAccount::Refusal refusal = parts_->account.last_refusal();
  if (parts_->backend->traits().has_caching_allocator && !refusal.injected) {
    m.error = SimulatedCudaOomMessage(options.limits, refusal.requested_bytes, refusal.live_bytes, m.error);
  }
  LiveBreakdown breakdown;
  if (run != nullptr) {
    breakdown = run->Breakdown(refusal.live_bytes);
  } else {
    breakdown.activations_and_transient_bytes = refusal.live_bytes;
  }
  m.oom = OomDetail{refusal.phase,    refusal.requested_bytes, options.limits.cap_bytes, refusal.live_bytes,
                    refusal.injected, m.error,                 breakdown};
}

MeasurementSession::Observed MeasurementSession::Finish() {
  Parts& p = *parts_;
  VariantMeasurement& m = p.m;
  m.transfers = p.transfers->count();
  m.transfer_bytes = p.transfers->bytes();
  m.ledger = p.account.ledger().Snapshot();
  KeepFirstAndLastIterations(&m);  // Note [Bounded iteration records], model/measurement.h
  Observed observed;
  if (p.observer) {
    observed.seen = p.observer->observations();
    observed.suspicion = p.observer->suspicion();
    observed.transfers = {p.transfers->backward_count(), p.transfers->backward_bytes()};
  }
  p.backend->Collect(&m);
  if (p.options.limits.faults) {
    m.injected = p.options.limits.faults->failures();
    m.injection =
        VariantMeasurement::Injection{p.options.limits.faults->Describe(), p.options.limits.faults->requests_seen()};
  }
  if (p.model_feed) {
    m.cuda_model = CudaModelMeasurementOf(*p.model_feed);
    if (!p.model_feed->config().unmodelled_keys.empty()) {
      m.warnings.push_back(UnmodelledKeysWarning(p.model_feed->config()));
    }
  }
  if (p.options.backend == Backend::kMeta && !p.options.kernels_warning.empty()) {
    m.warnings.push_back(p.options.kernels_warning);
  }
  for (const std::string& warning : TakeKernelWarnings()) m.warnings.push_back("--kernels cuda: " + warning);
  // Note [Unmirrored ops are said as they run] (backends/meta/kernel_target.h).
  for (std::string& warning : UnmirroredOpWarnings(TakeUnmirroredOps(), CurrentKernelTarget(), m.warnings)) {
    m.warnings.push_back(std::move(warning));
  }
  p.snapshot->Finish(&m);
  return observed;
}

}  // namespace oomguard
