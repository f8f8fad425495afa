#include "base/shard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace oomguard {
namespace {

constexpr const char* kTotalShards = "GTEST_TOTAL_SHARDS";
constexpr const char* kShardIndex = "GTEST_SHARD_INDEX";
constexpr const char* kStatusFile = "GTEST_SHARD_STATUS_FILE";

// Digits only: no sign, no spaces, and it fits an int.
bool ParseWholeNumber(std::string_view text, int* value) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

bool ParseShard(std::string_view text, Shard* shard, std::string* error) {
  const size_t slash = text.find('/');
  int index = 0, count = 0;
  if (slash == std::string_view::npos || !ParseWholeNumber(text.substr(0, slash), &index) ||
      !ParseWholeNumber(text.substr(slash + 1), &count) || index < 1 || index > count) {
    *error = "expected INDEX/COUNT with 1 <= INDEX <= COUNT, such as 2/3; got '" + std::string(text) + "'";
    return false;
  }
  *shard = Shard{index, count};
  return true;
}

bool ShardFromGTestVariables(Shard* shard, std::string* error) {
  const char* total = std::getenv(kTotalShards);
  const char* index = std::getenv(kShardIndex);
  if (total == nullptr && index == nullptr) return true;
  if (total == nullptr || index == nullptr) {
    const char* set = total ? kTotalShards : kShardIndex;
    *error = std::string(set) + " is set ('" + (total ? total : index) + "') but " +
             (total ? kShardIndex : kTotalShards) + " is not: GoogleTest's sharding needs both";
    return false;
  }
  int count = 0, position = 0;
  if (!ParseWholeNumber(total, &count) || count < 1) {
    *error = std::string(kTotalShards) + ": expected a whole number >= 1, got '" + total + "'";
    return false;
  }
  if (!ParseWholeNumber(index, &position) || position >= count) {
    *error = std::string(kShardIndex) + ": expected a whole number from 0 to " + std::to_string(count - 1) + " (" +
             kTotalShards + " is " + std::to_string(count) + "), got '" + index + "'";
    return false;
  }
  *shard = Shard{position + 1, count};  // GoogleTest counts from 0, --shard from 1
  return true;
}

bool TouchShardStatusFile(std::string* error) {
  const char* path = std::getenv(kStatusFile);
  if (path == nullptr) return true;
  const int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || futimens(fd, nullptr) != 0) {
    *error = std::string(kStatusFile) + ": cannot create '" + path + "': " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return false;
  }
  close(fd);
  return true;
}

bool ResolveShard(const std::optional<std::string>& flag, bool gtest_variables, Shard* shard, std::string* error) {
  *shard = Shard{};
  if (flag) {
    if (ParseShard(*flag, shard, error)) return true;
    *error = "--shard: " + *error;
    return false;
  }
  // Only when the variables decide: a runner told "honoured" while --shard overrode it would run
  // every shard's copy of the same files.
  return !gtest_variables || (ShardFromGTestVariables(shard, error) && TouchShardStatusFile(error));
}

std::string ShardName(const Shard& shard) {
  return shard.Sharded() ? std::to_string(shard.index) + "/" + std::to_string(shard.count) : "";
}

std::string ShardPath(std::string_view pattern, const Shard& shard) {
  constexpr std::string_view kPlaceholder = "{shard}";
  const std::string label =
      shard.Sharded() ? std::to_string(shard.index) + "-of-" + std::to_string(shard.count) : "all";
  std::string path;
  for (size_t at = 0;;) {
    const size_t found = pattern.find(kPlaceholder, at);
    path += pattern.substr(at, found - at);
    if (found == std::string_view::npos) return path;
    path += label;
    at = found + kPlaceholder.size();
  }
}

}  // namespace oomguard
