#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace oomguard::check_internal {

CheckFailure::CheckFailure(const char* file, int line, const char* function, const char* condition) {
  message_ << file << ":" << line << ": " << function << ": Check failed: " << condition << ": ";
}

CheckFailure::~CheckFailure() {
  message_ << "\n";
  std::fputs(message_.str().c_str(), stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace oomguard::check_internal
