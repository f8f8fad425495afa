// Golden files: compares a writer's output with tests/golden/NAME byte for byte, or rewrites the file
// when OOMGUARD_UPDATE_GOLDEN=1 (then review `git diff tests/golden/`).
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace oomguard::testing {

inline void ExpectMatchesGolden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(OOMGUARD_SOURCE_DIR) + "/tests/golden/" + name;
  if (const char* update = std::getenv("OOMGUARD_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    std::ofstream(path) << actual;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden file " << path << " (OOMGUARD_UPDATE_GOLDEN=1 writes it)";
  std::stringstream expected;
  expected << in.rdbuf();
  std::istringstream e(expected.str()), a(actual);
  std::string el, al;
  for (int line = 1;; ++line) {
    const bool more_e = static_cast<bool>(std::getline(e, el)), more_a = static_cast<bool>(std::getline(a, al));
    if (!more_e && !more_a) break;
    ASSERT_TRUE(more_e && more_a && el == al) << path << ":" << line << "\n  expected: " << (more_e ? el : "(end)")
                                              << "\n  actual:   " << (more_a ? al : "(end)");
  }
  EXPECT_EQ(expected.str(), actual) << path;  // also catches a difference in the final newline
}

}  // namespace oomguard::testing
