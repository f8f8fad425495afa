// Result codes in the style of LLVM lit: a closed set, each knowing whether it is a failure. Who sets
// them: the plan (run/plan.h) for a scenario that does not run (UNRESOLVED, UNSUPPORTED, SKIPPED), the
// verdict (verdict/verdict.h) for everything that ran, each code once.
#pragma once

#include <string_view>

namespace oomguard {

enum class ResultCode {
  kPass,         // ran and met every expectation
  kFail,         // ran and missed an expectation (outcome, leak, a check)
  kXFail,        // failed, and the scenario says it is known to (xfail)
  kXPass,        // passed although marked xfail: the mark is stale
  kUnsupported,  // the scenario does not run on this backend
  kSkipped,      // not run: --filter did not select it (RunResults::skipped, with the reason)
  kTimeout,      // killed after the per-variant timeout
  kUnresolved,   // could not be judged: the file did not load, or the child crashed
};

std::string_view ResultName(ResultCode code);  // "PASS", "FAIL", ...
bool IsFailure(ResultCode code);               // FAIL, XPASS, TIMEOUT, UNRESOLVED

// How an xfail mark remaps a final code: FAIL -> XFAIL, PASS -> XPASS, others unchanged. The verdict
// applies it once, after every reason to fail is known (verdict.h, Note [XFail applies last]).
ResultCode ApplyXFail(ResultCode code, bool xfail);

// The more severe of two results, for a scenario made of variants and checks.
ResultCode Worse(ResultCode a, ResultCode b);

}  // namespace oomguard
