#include "model/outcome.h"

namespace oomguard {

namespace {
constexpr std::string_view kErrorPrefix = "error:";
}  // namespace

std::string Name(const VariantOutcome& outcome) {
  if (outcome.kind != Outcome::kError) return std::string(Name(outcome.kind));
  return std::string(kErrorPrefix) + std::string(Name(outcome.category));
}

bool Parse(std::string_view text, VariantOutcome* out) {
  if (text.substr(0, kErrorPrefix.size()) == kErrorPrefix) {
    ErrorCategory category;
    if (!Parse(text.substr(kErrorPrefix.size()), &category)) return false;
    *out = VariantOutcome::Error(category);
    return true;
  }
  Outcome kind;
  if (!Parse(text, &kind) || kind == Outcome::kError) return false;  // a bare "error" has no category
  *out = kind == Outcome::kPass ? VariantOutcome::Pass() : VariantOutcome::Oom();
  return true;
}

std::vector<VariantOutcome> AllOutcomes() {
  std::vector<VariantOutcome> outcomes = {VariantOutcome::Pass(), VariantOutcome::Oom()};
  for (ErrorCategory category : AllValues<ErrorCategory>()) outcomes.push_back(VariantOutcome::Error(category));
  return outcomes;
}

std::vector<std::string> AllOutcomeNames() {
  std::vector<std::string> names;
  for (const VariantOutcome& outcome : AllOutcomes()) names.push_back(Name(outcome));
  return names;
}

}  // namespace oomguard
