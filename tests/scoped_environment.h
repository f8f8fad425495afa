// Environment variables set or unset for one test, and put back as they were when it ends (a test
// binary that a runner shards has GoogleTest's own sharding variables set).
//
//   testing::ScopedEnvironment env({"GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX"});  // saved, then unset
//   env.Set("GTEST_TOTAL_SHARDS", "3");
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace oomguard::testing {

class ScopedEnvironment {
 public:
  // Saves each named variable and unsets it, so the test starts from none of them.
  explicit ScopedEnvironment(std::initializer_list<const char*> names) {
    for (const char* name : names) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
      unsetenv(name);
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) value ? setenv(name.c_str(), value->c_str(), 1) : unsetenv(name.c_str());
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

  // Only for the variables named at construction: those are the ones put back.
  void Set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace oomguard::testing
