#include "fit/fit_world.h"

#include <algorithm>

#include "base/byte_size.h"
#include "base/did_you_mean.h"
#include "scenario/variant_rules.h"

namespace oomguard {
namespace {

constexpr const char* kWorkloadWorldHint =
    "fit varies parallel.world of a variant with `parallel`, e.g. \"parallel\": {\"world\": 2} (the workload's "
    "code reads it as ctx.WorldSize())";

// Note [A workload's world fit].
bool CheckWorkloadWorld(const VariantSpec& spec, const KnobValues& values, const std::string& where,
                        std::string* error) {
  if (!HasParallel(spec)) {
    *error =
        where + " (workload '" + spec.workload + "') has no `parallel`: it runs as rank 0 of 1; " + kWorkloadWorldHint;
    return false;
  }
  if (!values.empty() && spec.parallel.rank >= values.first()) {
    *error = where + " measures parallel.rank " + std::to_string(spec.parallel.rank) + ", which world " +
             std::to_string(values.first()) + " does not have (ranks are 0 .. world - 1): search from --min " +
             std::to_string(spec.parallel.rank + 1) + " or above, or leave rank out (rank 0)";
    return false;
  }
  return true;
}

bool AllWorkloads(const std::vector<const VariantSpec*>& variants) {
  return std::all_of(variants.begin(), variants.end(), [](const VariantSpec* v) { return !v->workload.empty(); });
}

}  // namespace

bool HasParallel(const VariantSpec& spec) { return spec.parallel != ParallelSpec{}; }

bool CheckWorldKnob(const VariantSpec& spec, const KnobValues& values, std::string* error) {
  const std::string where = "--knob world: variant '" + spec.name + "'";
  if (!spec.workload.empty()) return CheckWorkloadWorld(spec, values, where, error);
  if (!HasParallel(spec)) {
    *error = where +
             " has no `parallel`: it is the single-process step, which world does not change; fit varies "
             "parallel.world of a variant with a strategy, e.g. \"parallel\": {\"strategy\": \"zero2\"}";
    return false;
  }
  if (values.empty()) {
    *error =
        "--knob world: no world size between --min and --max (world sizes: 1, 2, 4, ... below --gpus-per-node, "
        "then its multiples)";
    return false;
  }
  for (const int64_t world : {values.first(), values.last()}) {
    for (const int64_t rank : MeasuredRanks(world)) {
      if (std::optional<SpecProblem> problem = FindSpecProblem(WithWorld(spec, world, rank))) {
        *error = where + " cannot run at parallel.world = " + std::to_string(world) + ", rank " + std::to_string(rank) +
                 ": at " + problem->path.ToString() + ": " + problem->message;
        return false;
      }
    }
  }
  return true;
}

bool SelectWorldVariants(const std::string& scenario, bool named, std::vector<const VariantSpec*>* variants,
                         std::vector<std::string>* left_out, std::string* error) {
  if (named) return true;
  std::vector<const VariantSpec*> kept;
  std::vector<std::string> all;
  for (const VariantSpec* v : *variants) {
    all.push_back(v->name);
    if (HasParallel(*v)) {
      kept.push_back(v);
    } else {
      left_out->push_back(v->name);
    }
  }
  if (kept.empty()) {
    *error = "--knob world: scenario '" + scenario +
             "' has no variant with `parallel` (variants: " + JoinNames(all, ", ") + "); " +
             (AllWorkloads(*variants) ? std::string(kWorkloadWorldHint)
                                      : "fit varies parallel.world of a variant with a strategy, e.g. \"parallel\": "
                                        "{\"strategy\": \"zero2\"}");
    return false;
  }
  *variants = std::move(kept);
  return true;
}

VariantSpec WithWorld(const VariantSpec& spec, int64_t world, int64_t rank) {
  VariantSpec changed = spec;
  changed.parallel.world = world;
  changed.parallel.rank = rank;
  return changed;
}

std::string WorldDoesNotShrink(const ParallelSpec& parallel) {
  if (parallel.strategy != "ddp") return "";
  return "ddp replicates parameters, gradients and optimizer state on every rank, and its buckets do not shrink: "
         "its peak does not fall as the world grows, so only the first world size was tried";
}

std::string WorldDoesNotFall(const VariantSpec& spec, const KnobValues& values, const TrialFunction& measure,
                             int64_t probe_cap, const ProbeObserver& observe) {
  if (spec.workload.empty()) return WorldDoesNotShrink(spec.parallel);
  // Note [A workload whose memory does not fall]: the first world, the next, the last.
  std::vector<int64_t> worlds = {values.first()};
  for (const int64_t w : {values.Doubled(values.first()), values.last()}) {
    if (w != worlds.back()) worlds.push_back(w);
  }
  if (worlds.size() == 1) return "";
  const FitTarget probe{"", probe_cap};
  int64_t n = 0;
  const auto trial = [&](int64_t world, const FitTarget& target) {
    const Trial t = measure(world, target);
    if (observe) observe(++n, static_cast<int64_t>(worlds.size()), world, t);
    return t;
  };
  const Trial first = trial(worlds[0], probe);
  if (first.outcome != Trial::Outcome::kFits) return "";
  std::vector<std::string> peaks = {FormatBytes(first.peak_bytes) + " at world " + std::to_string(worlds[0])};
  for (size_t i = 1; i < worlds.size(); ++i) {
    const Trial t = trial(worlds[i], probe);
    if (t.outcome == Trial::Outcome::kError) return "";
    if (t.outcome == Trial::Outcome::kFits && t.peak_bytes < first.peak_bytes) return "";
    peaks.push_back(
        (t.outcome == Trial::Outcome::kFits ? FormatBytes(t.peak_bytes) : "more than " + FormatBytes(probe_cap)) +
        " at world " + std::to_string(worlds[i]));
  }
  return "workload '" + spec.workload + "' holds no less as the world grows (rank " +
         std::to_string(spec.parallel.rank) + ": " + JoinNames(peaks, ", ") +
         "): its memory does not fall with the world (a rank that shards nothing holds what one process does), so "
         "only the first world size was tried";
}

std::string WorldStrategy(const VariantSpec& spec) { return spec.workload.empty() ? spec.parallel.strategy : "own"; }

std::vector<int64_t> MeasuredRanks(int64_t world) {
  if (world <= 1) return {0};
  return {0, world - 1};
}

std::vector<int64_t> MeasuredRanks(const VariantSpec& spec, int64_t world) {
  if (spec.workload.empty()) return MeasuredRanks(world);
  return {spec.parallel.rank};
}

Trial CombineRankTrials(const std::vector<Trial>& ranks) {
  Trial combined;
  int64_t allocated = 0;  // the largest allocated peak: the ledger's, where a rank's verdict is on reserved bytes
  bool reserved = false;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const Trial& t = ranks[i];
    for (const std::string& w : t.warnings) {
      if (std::find(combined.warnings.begin(), combined.warnings.end(), w) == combined.warnings.end()) {
        combined.warnings.push_back(w);
      }
    }
    if (i == 0) combined.steady_state = t.steady_state;
    if (t.outcome != Trial::Outcome::kFits) {
      combined.outcome = t.outcome;
      combined.error = t.error;
      combined.oom_detail = t.oom_detail;
      combined.peak_bytes = 0;
      combined.allocated_peak_bytes.reset();
      return combined;
    }
    combined.peak_bytes = std::max(combined.peak_bytes, t.peak_bytes);
    allocated = std::max(allocated, t.allocated_peak_bytes.value_or(t.peak_bytes));
    reserved |= t.allocated_peak_bytes.has_value();
  }
  if (reserved) combined.allocated_peak_bytes = allocated;
  return combined;
}

}  // namespace oomguard
