// OOMGUARD_CHECK: the check for programmer bugs. A failed check prints "file:line: function: Check
// failed: condition: message" to stderr and aborts; it never throws, so a harness bug can never be
// caught and turned into a scenario's outcome (STYLE §9: bugs abort, bad input returns an error,
// environment failures become result codes in one place). In a measuring child the parent reports the
// crash as UNRESOLVED with the child's stderr.
//
//   OOMGUARD_CHECK(!g_active) << "only one LayerTrace may exist at a time";
//
// Bad input never reaches a check: loaders and parsers return [[nodiscard]] errors with a location.
#pragma once

#include <ostream>
#include <sstream>

namespace oomguard::check_internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* function, const char* condition);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return message_; }

 private:
  std::ostringstream message_;
};

}  // namespace oomguard::check_internal

#define OOMGUARD_CHECK(condition) \
  while (!(condition)) ::oomguard::check_internal::CheckFailure(__FILE__, __LINE__, __func__, #condition).stream()
