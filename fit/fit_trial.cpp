#include "fit/fit_trial.h"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "allocators/cards.h"
#include "backends/backend.h"
#include "base/byte_size.h"
#include "base/did_you_mean.h"
#include "fit/fit_world.h"
#include "model/knobs.h"
#include "scenario/variant_rules.h"

namespace oomguard {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::vector<std::string> sizes;
  for (int64_t s : shape) sizes.push_back(std::to_string(s));
  return "[" + JoinNames(sizes, ", ") + "]";
}

Limits LimitsForTarget(const FitTarget& target) {
  std::string ignored;
  const CardPreset* card = target.card.empty() ? nullptr : FindCard(target.card, &ignored);
  return card != nullptr ? LimitsForCard(*card) : LimitsForCap(target.cap_bytes);
}

}  // namespace

KernelTarget CudaKernelsForTarget(const FitTarget& target, std::string* warning) {
  std::string ignored;
  const CardPreset* card = target.card.empty() ? nullptr : FindCard(target.card, &ignored);
  if (card != nullptr) return KernelTarget::Cuda(card->compute_capability, card->device);
  *warning = "--kernels cuda with a cap and no card: the kernels are a compute capability 8.0 card's (sm_80, an "
             "A100's 108 SMs)";
  return KernelTarget::Cuda(80);
}

namespace {

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// "runs out of memory in setup, with 130.98 GiB live (parameters 130.98 GiB) and 130.98 GiB more asked".
std::string OomDetailText(const OomDetail& oom) {
  std::vector<std::string> parts;
  const LiveBreakdown& b = oom.live;
  for (const auto& [name, bytes] : {std::pair<const char*, int64_t>{"parameters", b.parameters_bytes},
                                    {"gradients", b.gradients_bytes},
                                    {"optimizer state", b.optimizer_state_bytes},
                                    {"inputs", b.inputs_bytes},
                                    {"activations and transients", b.activations_and_transient_bytes},
                                    {"communication", b.communication_bytes}}) {
    if (bytes > 0) parts.push_back(std::string(name) + " " + FormatBytes(bytes));
  }
  return "runs out of memory in " + oom.phase + ", with " + FormatBytes(oom.live_bytes) + " live" +
         (parts.empty() ? "" : " (" + JoinNames(parts, ", ") + ")") + " and " + FormatBytes(oom.requested_bytes) +
         " more asked";
}

// Note [A fresh thread per trial]: when an OOM interrupts a backward pass, LibTorch's autograd engine
// leaves the graph's unfinished tasks in the ready queue of the thread that ran it. That queue is
// thread-local and outlives the call, so the tasks keep their saved tensors, and the parameters their
// AccumulateGrad nodes hold, alive (an attention model at an OOM in backward left 2 MiB so). Each trial
// runs on a thread of its own, whose end frees them, before the ledger is compared.
// Past timeout_seconds the thread is left running (Note [A trial that does not end], fit_trial.h): it
// owns copies of all it uses, and TrialTimedOut("timed out after N s") is thrown.
VariantMeasurement MeasureOnFreshThread(const MeasureFunction& measure, const VariantSpec& spec,
                                        const VariantMeasureOptions& options, double timeout_seconds) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable ended;
    bool done = false;
    VariantMeasurement m;
    std::exception_ptr error;
  };
  auto shared = std::make_shared<Shared>();
  std::thread worker([shared, measure, spec, options] {
    VariantMeasurement m;
    std::exception_ptr error;
    try {
      m = measure(spec, options);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->m = std::move(m);
    shared->error = error;
    shared->done = true;
    shared->ended.notify_one();
  });
  {
    std::unique_lock<std::mutex> lock(shared->mutex);
    if (!shared->ended.wait_for(lock, std::chrono::duration<double>(timeout_seconds), [&] { return shared->done; })) {
      lock.unlock();
      worker.detach();
      throw TrialTimedOut("timed out after " + std::to_string(static_cast<int>(timeout_seconds)) + " s (--timeout)");
    }
  }
  worker.join();
  if (shared->error) std::rethrow_exception(shared->error);
  return std::move(shared->m);
}

}  // namespace

std::string KnobField(const std::string& knob, const VariantSpec& spec) {
  if (knob == kWorldKnob) return "parallel.world";
  if (!spec.workload.empty()) return "knobs." + knob;
  return knob == "seq" ? "data.shape[0]" : "data.batch";
}

bool CheckKnob(const std::string& knob, const VariantSpec& spec, int64_t min_value, int64_t max_value,
               std::string* error) {
  const std::string where = "--knob " + knob + ": variant '" + spec.name + "'";
  if (knob == kWorldKnob) return CheckWorldKnob(spec, KnobValues::Nodes(min_value, max_value, 1), error);
  if (!spec.workload.empty()) {  // any integer knob; one the variant leaves out, the workload may read
    auto it = spec.knobs.find(knob);
    if (it != spec.knobs.end() && !std::holds_alternative<int64_t>(it->second)) {
      *error = where + " sets knob \"" + knob + "\" to " + FormatKnob(it->second) + " (" + KnobTypeName(it->second) +
               "); fit varies an integer knob";
      return false;
    }
    return true;
  }
  if (knob != "batch" && knob != "seq") {
    *error = "--knob " + knob +
             ": unknown knob; known: batch (data.batch), seq (data.shape[0]), world (parallel.world), and for a "
             "workload scenario its integer knobs";
    return false;
  }
  const DataSpec& d = spec.data;
  if (knob == "seq" && d.dtype != DType::kInt64 && d.shape.size() < 2) {
    *error = where + " has no sequence axis: data.shape " + ShapeText(d.shape) + " of " + std::string(Name(d.dtype)) +
             " holds features; seq varies data.shape[0] of token ids (data.dtype int64) or of samples shaped "
             "[seq, features]";
    return false;
  }
  for (const int64_t value : {min_value, max_value}) {
    if (std::optional<SpecProblem> problem = FindSpecProblem(WithKnob(spec, knob, value))) {
      *error = where + " cannot run with " + KnobField(knob, spec) + " = " + std::to_string(value) + ": at " +
               problem->path.ToString() + ": " + problem->message;
      return false;
    }
  }
  return true;
}

VariantSpec WithKnob(const VariantSpec& spec, const std::string& knob, int64_t value) {
  if (knob == kWorldKnob) return WithWorld(spec, value, 0);
  VariantSpec changed = spec;
  if (!spec.workload.empty()) {
    changed.knobs[knob] = value;
  } else if (knob == "seq") {
    if (!changed.data.shape.empty()) changed.data.shape[0] = value;
  } else {
    changed.data.batch = value;
  }
  return changed;
}

TrialFunction MakeFitTrial(const VariantSpec& spec, const std::string& knob, Backend backend, int64_t iterations,
                           double timeout_seconds, MeasureFunction measure, ModelCuda model_cuda,
                           CachingAllocatorConfig alloc_conf, bool cuda_kernels) {
  // One measurement of `changed`, the variant at `value` ("batch 64", "world 8 rank 7" in messages).
  auto measure_one = [spec, knob, backend, iterations, timeout_seconds, measure, model_cuda, alloc_conf, cuda_kernels](
                         const VariantSpec& changed, const std::string& at, const FitTarget& target) {
    VariantMeasureOptions options;
    options.backend = backend;
    if (cuda_kernels && backend == Backend::kMeta) {
      options.kernels = CudaKernelsForTarget(target, &options.kernels_warning);
    }
    options.model_cuda = model_cuda;
    options.alloc_conf = alloc_conf;
    options.limits = LimitsForTarget(target);
    options.iterations = iterations;
    options.timeline_points = 0;  // only the peak is needed
    options.diagnose = false;     // and a trial's pitfalls are the variant's: `oomguard run` reports them
    const Ledger& ledger = GetBackend(backend).account().ledger();
    const int64_t live_before = ledger.live_bytes();
    VariantMeasurement m;
    try {
      m = MeasureOnFreshThread(measure, changed, options, timeout_seconds);
    } catch (const TrialTimedOut& stuck) {
      throw TrialTimedOut("variant '" + spec.name + "' at " + at + " on " +
                          (target.card.empty() ? "cap " + FormatBytes(target.cap_bytes) : target.card) + ": " +
                          stuck.what());
    }
    const int64_t live_after = ledger.live_bytes();
    if (live_after != live_before) {
      const int64_t leaked = live_after - live_before;
      throw LeakBetweenTrials("variant '" + spec.name + "' at " + at + " left " + std::to_string(leaked) + " bytes" +
                              (leaked > 1024 || leaked < -1024 ? " (" + FormatSignedBytes(leaked) + ")" : "") +
                              " live in the " + std::string(Name(backend)) + " ledger after its trial (" +
                              std::to_string(live_before) + " bytes before it, " + std::to_string(live_after) +
                              " after); later trials would measure on top of them");
    }
    if (!m.input_error.empty()) throw InputErrorInTrial("variant '" + spec.name + "': " + m.input_error);
    Trial trial;
    trial.warnings = m.warnings;
    trial.steady_state = m.steady_state;
    if (m.outcome.kind == Outcome::kPass) {
      trial.peak_bytes = m.ledger.peak_bytes;
      if (m.cuda_model && m.cuda_model->decides) {
        trial.peak_bytes = m.cuda_model->reserved_peak_bytes;
        trial.allocated_peak_bytes = m.ledger.peak_bytes;
      }
    } else if (m.outcome.kind == Outcome::kOom) {
      trial.outcome = Trial::Outcome::kOom;
      if (m.oom) trial.oom_detail = OomDetailText(*m.oom);
    } else {
      trial.outcome = Trial::Outcome::kError;
      trial.error = "at " + at + ": " + Name(m.outcome) + ": " + FirstLine(m.error);
    }
    return trial;
  };
  if (knob == kWorldKnob) {  // Note [Which ranks a world fit measures], fit_world.h
    return [spec, measure_one](int64_t world, const FitTarget& target) {
      std::vector<Trial> ranks;
      for (const int64_t rank : MeasuredRanks(spec, world)) {
        const std::string at = "world " + std::to_string(world) + (world > 1 ? " rank " + std::to_string(rank) : "");
        ranks.push_back(measure_one(WithWorld(spec, world, rank), at, target));
        Trial& last = ranks.back();
        if (!last.oom_detail.empty()) {
          last.oom_detail = (world > 1 ? "rank " + std::to_string(rank) : "the single process") + " " + last.oom_detail;
        }
        if (last.outcome != Trial::Outcome::kFits) break;
      }
      return CombineRankTrials(ranks);
    };
  }
  return [spec, knob, measure_one](int64_t value, const FitTarget& target) {
    return measure_one(WithKnob(spec, knob, value), knob + " " + std::to_string(value), target);
  };
}

}  // namespace oomguard
