#include "fit/fit_world.h"

#include <algorithm>

#include "base/did_you_mean.h"
#include "scenario/variant_rules.h"

namespace oomguard {

bool HasParallel(const VariantSpec& spec) { return spec.parallel != ParallelSpec{}; }

bool CheckWorldKnob(const VariantSpec& spec, const KnobValues& values, std::string* error) {
  const std::string where = "--knob world: variant '" + spec.name + "'";
  if (!spec.workload.empty()) {
    *error = where + " is registered workload '" + spec.workload +
             "', which runs its own distributed code: fit varies world for layer-list variants only (set "
             "parallel.world in the variant, or fit one of its integer knobs)";
    return false;
  }
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
             "' has no variant with `parallel` (variants: " + JoinNames(all, ", ") +
             "); fit varies parallel.world of a variant with a strategy, e.g. \"parallel\": {\"strategy\": \"zero2\"}";
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

std::vector<int64_t> MeasuredRanks(int64_t world) {
  if (world <= 1) return {0};
  return {0, world - 1};
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
