#include "run/run_options.h"

#include "allocators/cards.h"
#include "base/byte_size.h"
#include "model/enum_names.h"
#include "model/phase.h"
#include "run/rank_inject.h"

namespace oomguard {

bool ResolveLimits(const RunOptions& options, const std::string& default_card, Limits* limits, std::string* error) {
  if (!options.cap.empty()) {
    int64_t cap = 0;
    if (!ParseByteSize(options.cap, &cap, error)) {
      *error = "--cap: " + *error;
      return false;
    }
    if (cap <= 0) {
      *error = "--cap: the cap must be larger than 0 bytes";
      return false;
    }
    *limits = LimitsForCap(cap);
  } else {
    const CardPreset* card = FindCard(options.card.empty() ? default_card : options.card, error);
    if (card == nullptr) {
      *error = "--card: " + *error;
      return false;
    }
    *limits = LimitsForCard(*card);
  }
  if (!options.context.empty()) {
    if (limits->card.empty()) {
      *error = "--context only applies with --card (a --cap is already what tensors may use)";
      return false;
    }
    int64_t context = 0;
    if (!ParseByteSize(options.context, &context, error)) {
      *error = "--context: " + *error;
      return false;
    }
    if (context >= limits->card_total_bytes) {
      *error = "--context: " + FormatBytes(context) + " leaves nothing of the card's " +
               FormatBytes(limits->card_total_bytes);
      return false;
    }
    limits->context_bytes = context;
    limits->cap_bytes = limits->card_total_bytes - context;
  }
  if (!options.inject.empty()) {
    std::vector<std::unique_ptr<FaultPolicy>> policies;
    for (const std::string& spec : options.inject) {
      // Note [Injection per rank] (run/rank_inject.h): a child is given only its own rank's specs; here
      // rank= is checked and the rest parsed.
      std::optional<int64_t> rank;
      std::string rest;
      if (!SplitRankClause(spec, &rank, &rest, error)) {
        *error = "--inject: " + *error;
        return false;
      }
      auto policy = ParseFaultSpec(rest, error, AllNames<Phase>());
      if (!policy) {
        *error = "--inject: " + *error;
        return false;
      }
      policies.push_back(std::move(policy));
    }
    limits->faults = std::make_shared<FaultInjector>(policies.size() == 1 ? std::move(policies.front())
                                                                          : AnyOf(std::move(policies)));
  }
  return true;
}

ModelCuda ModelCudaFor(const std::string& verdict, bool model_cuda) {
  if (verdict != kVerdictAllocated) return ModelCuda::kVerdict;
  return model_cuda ? ModelCuda::kPredict : ModelCuda::kOff;
}

bool ResolveAllocConf(const std::optional<std::string>& flag, std::string* text, CachingAllocatorConfig* config,
                      std::string* error, std::string_view flag_name) {
  *text = flag ? *flag : CachingAllocatorConfigFromEnvironment();
  std::optional<CachingAllocatorConfig> parsed = ParseCachingAllocatorConfig(*text, error);
  if (!parsed) {
    // The parser's "allocator config: " becomes where the text came from.
    constexpr std::string_view kParserPrefix = "allocator config: ";
    if (error->rfind(kParserPrefix, 0) == 0) error->erase(0, kParserPrefix.size());
    *error = (flag ? std::string(flag_name) + ": " : "PYTORCH_ALLOC_CONF (from the environment): ") + *error;
    return false;
  }
  *config = std::move(*parsed);
  return true;
}

bool CheckKernelsFlag(const std::string& kernels, const std::string& backend, std::string* error) {
  if (kernels.empty() || backend == "meta") return true;
  *error = "--kernels " + kernels + ": only the meta backend mirrors other kernels (--backend " + backend +
           " runs its own); use --backend meta";
  return false;
}

bool ScenarioKernelTarget(const RunOptions& options, const Scenario& scenario, KernelTarget* target,
                          std::string* warning, std::string* error) {
  *target = KernelTarget::Cpu();
  warning->clear();
  if (options.kernels != kKernelsCuda) return true;
  std::string card = options.card, cap = options.cap;
  if (card.empty() && cap.empty()) card = scenario.card, cap = scenario.cap;
  if (card.empty() && !cap.empty()) {
    *target = KernelTarget::Cuda(kCapOnlyComputeCapability);
    *warning =
        "--kernels cuda with a cap and no card: the kernels are a compute capability 8.0 card's (sm_80, an "
        "A100's 108 SMs); give --card for another";
    return true;
  }
  const CardPreset* preset = FindCard(card.empty() ? kDefaultCard : card, error);
  if (preset == nullptr) return false;
  *target = KernelTarget::Cuda(preset->compute_capability, preset->device);
  return true;
}

bool ScenarioLimits(const RunOptions& options, const Scenario& scenario, Limits* limits, std::string* error) {
  RunOptions effective = options;
  if (options.card.empty() && options.cap.empty()) {
    effective.card = scenario.card;
    effective.cap = scenario.cap;
  }
  return ResolveLimits(effective, kDefaultCard, limits, error);
}

}  // namespace oomguard
