// oomguard::Measure (oomguard/measure.h): a workload's function measured in this process, and the
// public Measurement made from the harness's VariantMeasurement.
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "allocators/cards.h"
#include "backends/backend.h"
#include "base/atomic_file.h"
#include "base/byte_size.h"
#include "base/check.h"
#include "base/did_you_mean.h"
#include "model/diagnosis_text.h"
#include "model/measurement.h"
#include "model/phase.h"
#include "oomguard/measure.h"
#include "run/in_process_measure.h"
#include "run/run_options.h"
#include "workload/workload.h"
#include "workload/workload_registry.h"

namespace oomguard {

std::mutex& MeasureMutex() {
  static std::mutex mutex;
  return mutex;
}

VariantMeasureOptions HarnessOptions(const MeasureOptions& options) {
  VariantMeasureOptions harness;
  if (!Parse(options.backend, &harness.backend)) {
    throw std::invalid_argument("oomguard::Measure: backend '" + options.backend + "' is not one of " +
                                JoinNames(AllNames<Backend>(), ", "));
  }
  if (std::string why; !GetBackend(harness.backend).Available(&why)) {
    throw std::invalid_argument("oomguard::Measure: backend " + options.backend + ": " + why);
  }
  RunOptions flags;
  flags.card = options.card;
  flags.cap = options.cap;
  flags.inject = options.inject;
  std::string error;
  if (options.card.empty() && options.cap.empty()) flags.cap = "1";  // only to resolve --inject; no cap below
  if (!ResolveLimits(flags, "", &harness.limits, &error)) throw std::invalid_argument("oomguard::Measure: " + error);
  if (options.card.empty() && options.cap.empty()) harness.limits.cap_bytes = Ledger::kUnlimited;
  harness.iterations = options.iterations;
  harness.eval_no_grad = options.eval_no_grad;
  // Note [The in-process verdict], oomguard/measure.h: the CLI's rules, but no cap has nothing to decide.
  if (!options.verdict.empty() && options.verdict != kVerdictReserved && options.verdict != kVerdictAllocated) {
    throw std::invalid_argument("oomguard::Measure: verdict '" + options.verdict + "' is not one of " +
                                kVerdictReserved + ", " + kVerdictAllocated);
  }
  harness.model_cuda = ModelCudaFor(options.verdict.empty() ? kVerdictReserved : options.verdict, false);
  if (harness.model_cuda == ModelCuda::kVerdict && harness.limits.cap_bytes == Ledger::kUnlimited) {
    harness.model_cuda = ModelCuda::kPredict;
  }
  std::string alloc_conf;
  if (!ResolveAllocConf(options.alloc_conf.empty() ? std::nullopt : std::optional<std::string>(options.alloc_conf),
                        &alloc_conf, &harness.alloc_conf, &error, "alloc_conf")) {
    throw std::invalid_argument("oomguard::Measure: " + error);
  }
  if (!options.snapshot.empty()) {
    if (!CheckWritablePath(options.snapshot, &error)) throw std::invalid_argument("oomguard::Measure: snapshot " + error);
    harness.snapshot.path = options.snapshot;
    harness.snapshot.always = true;  // asked for by name: written whether the measurement passed or not
    harness.snapshot.source = {"oomguard::Measure", "measure", "measure", options.backend,
                               options.card.empty() && options.cap.empty() ? -1 : harness.limits.cap_bytes};
  }
  if (!options.kernels.empty() && options.kernels != kKernelsCpu && options.kernels != kKernelsCuda) {
    throw std::invalid_argument("oomguard::Measure: kernels '" + options.kernels + "' is not one of cpu, cuda");
  }
  if (!CheckKernelsFlag(options.kernels, options.backend, &error)) {
    throw std::invalid_argument("oomguard::Measure: " + error);
  }
  RunOptions kernels;
  kernels.kernels = options.kernels;
  kernels.card = options.card;
  kernels.cap = options.cap;
  if (!ScenarioKernelTarget(kernels, Scenario{}, &harness.kernels, &harness.kernels_warning, &error)) {
    throw std::invalid_argument("oomguard::Measure: " + error);
  }
  return harness;
}

// Note [The cpu backend's host is its device]: a GPU loop builds its model on the host and moves it
// (`LlamaForCausalLM(cfg).to("cuda", torch.bfloat16)`: float32 on the host, bf16 on the card); on the
// cpu backend the same code builds and casts in one memory, the ledger's, and setup's peak holds both
// (a 4-layer Llama: 200.52 MiB on cpu, 84.64 MiB on meta, what a card would hold). Nothing tells a host tensor
// from a device one there, so where it decides, a peak or an OOM in setup, the measurement says so.
static std::optional<std::string> HostIsTheDevice(const VariantMeasurement& m) {
  const std::string setup(Name(Phase::kSetup));
  if (m.backend != "cpu") return std::nullopt;
  const bool oom_in_setup = m.oom && !m.oom->injected && m.oom->phase == setup;  // an injected one is no size
  const bool peak_in_setup = !m.iterations.empty() && m.ledger.peak_phase == setup;
  if (!oom_in_setup && !peak_in_setup) return std::nullopt;
  return std::string(oom_in_setup ? "the out of memory" : "the peak") +
         " is in setup, where the cpu backend's host and device are one memory: what setup builds on the host "
         "and then moves (a model made in float32 and cast by .to(device, dtype), a dataset) counts here beside "
         "its copy, where a GPU holds only the copy; the meta backend books them apart (or build on the device: "
         "with torch.device(m.device): ...)";
}

Measurement ToPublic(const VariantMeasurement& m) {
  Measurement out;
  out.outcome = Name(m.outcome);
  out.error = m.error;
  out.backend = m.backend;
  out.card = m.card;
  out.kernels = m.kernels;
  out.cap_bytes = m.cap_bytes == Ledger::kUnlimited ? -1 : m.cap_bytes;
  out.peak_bytes = m.ledger.peak_bytes;
  out.peak_phase = m.ledger.peak_phase;
  for (const PhasePeak& p : m.ledger.phase_peaks) out.phase_peak_bytes[p.phase] = p.peak_bytes;
  for (const PhasePeak& p : m.ledger.peak_by_origin) out.live_at_peak_by_phase.emplace_back(p.phase, p.peak_bytes);
  out.alloc_count = m.ledger.alloc_count;
  for (const IterationMeasurement& i : m.iterations) {
    out.live_after_iteration_bytes.push_back(i.live_after_bytes);
    out.iteration_peak_bytes.push_back(i.peak_bytes);
  }
  out.live_growth_per_iteration_bytes = LiveGrowthPerIteration(m);
  out.parameter_bytes = m.param_bytes;
  out.gradient_bytes = m.grad_bytes;
  out.optimizer_state_bytes = m.optimizer_state_bytes;
  out.forward_saved_bytes = m.forward_saved_bytes;
  out.transfers = m.transfers;
  out.transfer_bytes = m.transfer_bytes;
  out.warnings = m.warnings;
  out.steady_state = m.steady_state;
  if (m.oom) {
    const LiveBreakdown& b = m.oom->live;
    out.oom = Measurement::Oom{m.oom->phase,
                               m.oom->requested_bytes,
                               m.oom->live_bytes,
                               m.oom->injected,
                               b.parameters_bytes,
                               b.gradients_bytes,
                               b.optimizer_state_bytes,
                               b.inputs_bytes,
                               b.activations_and_transient_bytes};
  }
  if (m.cuda_model) {
    const CudaModelMeasurement& c = *m.cuda_model;
    out.cuda_model = Measurement::CudaModel{c.allocated_peak_bytes,
                                            c.reserved_peak_bytes,
                                            c.requested_peak_bytes,
                                            c.segments_peak,
                                            c.alloc_retries,
                                            c.ooms,
                                            c.decides,
                                            c.allocated_at_start_bytes,
                                            c.reserved_at_start_bytes};
  }
  if (m.cuda) {
    const CudaMeasurement& c = *m.cuda;
    out.cuda = Measurement::CudaAllocator{c.allocated_peak_bytes,     c.reserved_peak_bytes,
                                          c.active_peak_bytes,        c.requested_peak_bytes,
                                          c.alloc_retries,            c.ooms,
                                          c.allocated_at_start_bytes, c.reserved_at_start_bytes};
  }
  if (m.injection) {
    out.injection = Measurement::Injection{m.injection->spec, m.injection->requests_seen, {}};
    for (const InjectedFailure& f : m.injected) {
      out.injection->failures.push_back({f.allocation_index, f.bytes, f.phase, f.policy});
    }
    if (m.injected.empty()) {  // as verdict.cpp fails a variant for it
      out.warnings.push_back("inject " + m.injection->spec + " never fired: it saw " +
                             std::to_string(m.injection->requests_seen) +
                             " allocation requests and failed none (a fault that never fires tests nothing)");
    }
  }
  if (const std::optional<std::string> host = HostIsTheDevice(m)) out.warnings.push_back(*host);
  out.snapshot = m.snapshot;
  out.snapshot_error = m.snapshot_error;
  for (const Diagnosis& d : m.diagnoses) {
    out.diagnoses.push_back({std::string(Name(d.kind)), std::string(Severity(d.kind)), d.bytes,
                             std::string(Name(d.per)), d.phase, d.where, d.message, d.fix, DiagnosisAmount(d)});
  }
  return out;
}

namespace {

Measurement MeasureWith(const WorkloadFunction& workload, const std::string& name, const MeasureOptions& options) {
  const VariantMeasureOptions harness = HarnessOptions(options);
  VariantSpec spec;
  spec.name = "measure";
  spec.workload = name;
  spec.knobs = options.knobs;
  spec.seed = options.seed;
  spec.loop.iterations = options.iterations;
  if (options.world < 1 || options.rank < 0 || options.rank >= options.world) {
    throw std::invalid_argument("oomguard::Measure: rank " + std::to_string(options.rank) + " of world " +
                                std::to_string(options.world) + ": world must be >= 1 and rank 0 .. world - 1");
  }
  spec.parallel.world = options.world;
  spec.parallel.rank = options.rank;
  VariantMeasurement m;
  {
    std::lock_guard<std::mutex> lock(MeasureMutex());  // Note [What an in-process measurement resets]
    m = MeasureWorkload(workload, spec, harness);
  }
  if (!m.input_error.empty()) throw std::invalid_argument("oomguard::Measure: " + m.input_error);
  Measurement out = ToPublic(m);
  if (options.world > 1) {  // one simulated rank (Note [A workload's own ranks])
    out.world = options.world;
    out.rank = options.rank;
    out.process_group = "fake";
  }
  return out;
}

// Phase peaks in the order a step runs its phases (model/phase.h), a user's own names after them:
// the map's alphabetical order put "backward" before "forward".
std::vector<std::pair<std::string, int64_t>> InStepOrder(const std::map<std::string, int64_t>& peaks) {
  std::vector<std::pair<std::string, int64_t>> ordered(peaks.begin(), peaks.end());
  const auto rank = [](const std::string& name) {
    Phase phase;
    return Parse(name, &phase) ? static_cast<int>(phase) : static_cast<int>(EnumNames<Phase>::kNames.size());
  };
  std::stable_sort(ordered.begin(), ordered.end(),
                   [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
  return ordered;
}

// "step" is the loop's code outside the phases it marks (model/phase.h): a user who marked forward,
// backward and optimizer never named it, and read it as a phase of theirs.
std::string PhaseLabel(const std::string& phase) {
  return phase == Name(Phase::kStep) ? phase + " (outside the marked phases)" : phase;
}

}  // namespace

Measurement Measure(const WorkloadFunction& workload, const MeasureOptions& options) {
  if (options.iterations < 1) throw std::invalid_argument("oomguard::Measure: iterations must be at least 1");
  return MeasureWith(workload, "measured", options);
}

Measurement Measure(const std::string& registered_workload, const MeasureOptions& options) {
  const WorkloadFunction* function = FindWorkload(registered_workload);
  if (function == nullptr) {
    Scenario one;
    one.variants.emplace_back().workload = registered_workload;
    std::string why;
    const bool registered = WorkloadsRegistered(one, &why);
    OOMGUARD_CHECK(!registered);
    throw std::invalid_argument("oomguard::Measure: " + why);
  }
  if (options.iterations < 1) throw std::invalid_argument("oomguard::Measure: iterations must be at least 1");
  return MeasureWith(*function, registered_workload, options);
}

int64_t CardCapBytes(const std::string& card) {
  std::string error;
  const CardPreset* preset = FindCard(card, &error);
  if (preset == nullptr) throw std::invalid_argument("oomguard::CardCapBytes: " + error);
  return LimitsForCard(*preset).cap_bytes;
}

int64_t ParseBytes(const std::string& size) {
  int64_t bytes = 0;
  std::string error;
  if (!ParseByteSize(size, &bytes, &error)) throw std::invalid_argument("oomguard::ParseBytes: " + error);
  return bytes;
}

std::string DescribeBytes(int64_t bytes) {
  return FormatBytes(bytes) + (bytes >= 1024 || bytes <= -1024 ? " (" + std::to_string(bytes) + " bytes)" : "");
}

const Measurement::Diagnosis* Measurement::diagnosis(const std::string& kind) const {
  for (const Diagnosis& d : diagnoses) {
    if (d.kind == kind) return &d;
  }
  return nullptr;
}

std::string Measurement::Oom::Describe() const {
  std::ostringstream out;
  out << "out of memory in " << phase << ": " << DescribeBytes(requested_bytes) << " requested with "
      << DescribeBytes(live_bytes) << " live" << (injected ? " (an injected failure)" : "")
      << ": parameters " << FormatBytes(parameters_bytes) << ", gradients " << FormatBytes(gradients_bytes)
      << ", optimizer state " << FormatBytes(optimizer_state_bytes) << ", inputs " << FormatBytes(inputs_bytes)
      << ", activations and transients " << FormatBytes(activations_and_transient_bytes);
  return out.str();
}

std::string Measurement::Describe() const {
  std::ostringstream out;
  out << "outcome " << outcome << " on " << backend;
  if (backend == "meta" && !kernels.empty()) out << " (" << kernels << " kernels)";  // whose bytes these are
  out << (card.empty() ? cap_bytes < 0 ? ", no cap" : ", cap " + DescribeBytes(cap_bytes)
                       : ", card " + card + " (cap " + DescribeBytes(cap_bytes) + ")");
  if (!process_group.empty()) out << ", rank " << rank << " of " << world << " (" << process_group << " process group)";
  out << "\n";
  if (!error.empty()) out << "  error: " << error.substr(0, error.find('\n')) << "\n";
  out << "  peak " << DescribeBytes(peak_bytes) << " in " << peak_phase << "\n";
  if (cuda_model) {
    const CudaModel& c = *cuda_model;
    out << "  cuda model: "
        << DescribeCudaModel({c.allocated_peak_bytes, c.reserved_peak_bytes, c.requested_peak_bytes, c.segments_peak,
                              c.alloc_retries, c.ooms, c.decides, c.allocated_at_start_bytes,
                              c.reserved_at_start_bytes})
        << "\n";
  }
  if (cuda) {
    out << "  cuda allocator: allocated " << FormatBytes(cuda->allocated_peak_bytes) << ", reserved "
        << FormatBytes(cuda->reserved_peak_bytes) << " (fragmentation " << FormatBytes(cuda->fragmentation_bytes())
        << "), " << cuda->alloc_retries << (cuda->alloc_retries == 1 ? " retry, " : " retries, ") << cuda->ooms
        << (cuda->ooms == 1 ? " OOM" : " OOMs");
    if (cuda->allocated_at_start_bytes > 0) {
      out << "; peaks include " << FormatBytes(cuda->allocated_at_start_bytes)
          << " held from the start (library workspaces)";
    }
    out << "\n";
  }
  if (!live_at_peak_by_phase.empty()) {
    out << "  live at the peak, by the phase that allocated it:";
    for (const auto& [phase, bytes] : live_at_peak_by_phase) out << " " << phase << " " << FormatBytes(bytes) << ";";
    out << "\n";
  }
  if (!phase_peak_bytes.empty()) {
    out << "  phase peaks:";
    for (const auto& [phase, bytes] : InStepOrder(phase_peak_bytes)) {
      out << " " << PhaseLabel(phase) << " " << FormatBytes(bytes) << ";";
    }
    out << "\n";
  }
  if (!live_after_iteration_bytes.empty()) {
    out << "  live after each iteration:";
    for (int64_t bytes : live_after_iteration_bytes) out << " " << FormatBytes(bytes);
    if (live_growth_per_iteration_bytes) {
      out << " (growth " << FormatSignedBytes(static_cast<int64_t>(*live_growth_per_iteration_bytes))
          << " per iteration)";
    }
    out << "\n";
  }
  if (!steady_state.empty()) out << "  steady state: " << steady_state << "\n";
  for (const std::string& warning : warnings) out << "  warning: " << warning << "\n";
  out << "  parameters " << FormatBytes(parameter_bytes);
  if (gradient_bytes) out << ", gradients " << FormatBytes(*gradient_bytes);
  if (optimizer_state_bytes) out << ", optimizer state " << FormatBytes(*optimizer_state_bytes);
  out << "\n";
  if (oom) out << "  " << oom->Describe() << "\n";
  if (injection) {
    out << "  inject " << injection->spec << ": " << injection->requests_seen << " requests seen";
    for (const Injection::Failure& f : injection->failures) {
      out << "; failed #" << f.allocation_index << " (" << DescribeBytes(f.bytes) << " in " << f.phase << ")";
    }
    out << "\n";
  }
  if (!snapshot.empty()) out << "  snapshot: " << snapshot << "\n";
  if (!snapshot_error.empty()) out << "  snapshot not written: " << snapshot_error << "\n";
  for (const Diagnosis& d : diagnoses) {
    out << "  " << (d.severity == "advice" ? "advice " : "diagnosis ") << d.kind << " (" << d.amount
        << "): " << d.message << "\n    fix: " << d.fix << "\n";
  }
  return out.str();
}

}  // namespace oomguard
