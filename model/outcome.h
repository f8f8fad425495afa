// How running a variant ended: it passed, ran out of memory, or raised an error of some category.
// Scenario files expect it ("expect": {"a": {"outcome": "error:inplace-leaf"}}), measurements record
// it, and results JSON spells it "pass" | "oom" | "error:<category>".
//
//   VariantOutcome o = VariantOutcome::Error(ErrorCategory::kInplaceLeaf);
//   Name(o);                                  // "error:inplace-leaf"
//   if (o.kind == Outcome::kPass) ...         // compare kinds, never spellings
//   VariantOutcome read;
//   if (!Parse("error:inplace-leaf", &read)) { ... }  // false for anything not in AllOutcomeNames()
//
// Note [One outcome value]: the outcome and its category travel as one value, not as two fields,
// so an expectation and a measurement compare with ==, and a pass can never carry a category: the
// factories set category kError for pass and oom. Header-only apart from the names.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "model/enum_names.h"

namespace oomguard {

enum class Outcome { kPass, kOom, kError };

template <>
struct EnumNames<Outcome> {
  static constexpr std::array<std::string_view, 3> kNames = {"pass", "oom", "error"};
};

// What kind of error (workload/error_category.h sorts exceptions into these). kError is "any other".
enum class ErrorCategory { kInplaceSavedTensor, kInplaceLeaf, kMetaKernelMissing, kError };

template <>
struct EnumNames<ErrorCategory> {
  static constexpr std::array<std::string_view, 4> kNames = {"inplace-saved-tensor", "inplace-leaf",
                                                             "meta-kernel-missing", "error"};
};

struct VariantOutcome {
  Outcome kind = Outcome::kPass;
  ErrorCategory category = ErrorCategory::kError;  // meaningful for kError only

  static VariantOutcome Pass() { return {Outcome::kPass, ErrorCategory::kError}; }
  static VariantOutcome Oom() { return {Outcome::kOom, ErrorCategory::kError}; }
  static VariantOutcome Error(ErrorCategory category) { return {Outcome::kError, category}; }

  friend bool operator==(const VariantOutcome&, const VariantOutcome&) = default;
};

// "pass", "oom" or "error:<category>".
std::string Name(const VariantOutcome& outcome);

// The inverse of Name; false (and *out untouched) for any other text.
[[nodiscard]] bool Parse(std::string_view text, VariantOutcome* out);

// Every outcome a scenario can expect, in order: pass, oom, then error:<category> for each category.
std::vector<VariantOutcome> AllOutcomes();
std::vector<std::string> AllOutcomeNames();

}  // namespace oomguard
