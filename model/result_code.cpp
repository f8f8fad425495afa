#include "model/result_code.h"

namespace oomguard {
namespace {

// Severity order for Worse: later entries win.
int Severity(ResultCode code) {
  switch (code) {
    case ResultCode::kSkipped:
      return 0;
    case ResultCode::kUnsupported:
      return 1;
    case ResultCode::kPass:
      return 2;
    case ResultCode::kXFail:
      return 3;
    case ResultCode::kXPass:
      return 4;
    case ResultCode::kFail:
      return 5;
    case ResultCode::kTimeout:
      return 6;
    case ResultCode::kUnresolved:
      return 7;
  }
  return 7;
}

}  // namespace

std::string_view ResultName(ResultCode code) {
  switch (code) {
    case ResultCode::kPass:
      return "PASS";
    case ResultCode::kFail:
      return "FAIL";
    case ResultCode::kXFail:
      return "XFAIL";
    case ResultCode::kXPass:
      return "XPASS";
    case ResultCode::kUnsupported:
      return "UNSUPPORTED";
    case ResultCode::kSkipped:
      return "SKIPPED";
    case ResultCode::kTimeout:
      return "TIMEOUT";
    case ResultCode::kUnresolved:
      return "UNRESOLVED";
  }
  return "UNRESOLVED";
}

bool IsFailure(ResultCode code) {
  return code == ResultCode::kFail || code == ResultCode::kXPass || code == ResultCode::kTimeout ||
         code == ResultCode::kUnresolved;
}

ResultCode ApplyXFail(ResultCode code, bool xfail) {
  if (!xfail) return code;
  if (code == ResultCode::kFail) return ResultCode::kXFail;
  if (code == ResultCode::kPass) return ResultCode::kXPass;
  return code;
}

ResultCode Worse(ResultCode a, ResultCode b) { return Severity(a) >= Severity(b) ? a : b; }

}  // namespace oomguard
