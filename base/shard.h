// A shard of a run: the part of its scenario files one of COUNT CI jobs takes, so that the jobs split a
// catalog between them. Given as `oomguard run --shard INDEX/COUNT` (1-based), or, as a test runner
// shards a GoogleTest binary, by GTEST_SHARD_INDEX (0-based) and GTEST_TOTAL_SHARDS.
//
//   oomguard::Shard shard;
//   std::string error;
//   if (!oomguard::ResolveShard("2/3", /*gtest_variables=*/true, &shard, &error)) { usage error }
//   shard.Takes(4);                                  // true: file 4 (0-based) goes to shard (4 mod 3) + 1
//   oomguard::ShardPath("junit-{shard}.xml", shard);  // "junit-2-of-3.xml"; not sharded: "junit-all.xml"
//
// The deal is round-robin over positions, as GoogleTest deals tests, so it depends only on the order of
// the files: the same files give the same split, and the shards are disjoint and cover every file.
//
// Error policy: parsing returns false with a one-line message that says what was expected and what it
// got (naming the variable for GoogleTest's); the CLI turns that into exit code 2.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace oomguard {

struct Shard {
  int index = 0;  // 1-based; with count 0 the run is not sharded
  int count = 0;

  bool Sharded() const { return count > 0; }
  // Whether the file at this position (0-based, in plan order) is this shard's.
  bool Takes(size_t position) const {
    return !Sharded() || position % static_cast<size_t>(count) == static_cast<size_t>(index - 1);
  }
};

// "INDEX/COUNT" with whole numbers 1 <= INDEX <= COUNT. Else false, with "expected INDEX/COUNT with
// 1 <= INDEX <= COUNT, such as 2/3; got 'TEXT'".
[[nodiscard]] bool ParseShard(std::string_view text, Shard* shard, std::string* error);

// GoogleTest's GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX. Neither set: true, and *shard is left as it is.
// One without the other, or a value that is not a whole number in range: false, naming the variable.
[[nodiscard]] bool ShardFromGTestVariables(Shard* shard, std::string* error);

// Creates the file GTEST_SHARD_STATUS_FILE names, as GoogleTest does to tell a runner that it honours
// sharding (an existing file is kept). True when the variable is not set.
[[nodiscard]] bool TouchShardStatusFile(std::string* error);

// The shard of `oomguard run`: --shard's text when given (its errors prefixed "--shard: "); else, with
// gtest_variables, GoogleTest's variables (and then the status file is touched); else not sharded.
[[nodiscard]] bool ResolveShard(const std::optional<std::string>& flag, bool gtest_variables, Shard* shard,
                                std::string* error);

// "2/3", as the console and the JUnit report name the shard; "" when not sharded.
std::string ShardName(const Shard& shard);

// Every "{shard}" in a report's path replaced by "INDEX-of-COUNT", or by "all" when not sharded, so that
// each shard of a CI matrix writes files of its own.
std::string ShardPath(std::string_view pattern, const Shard& shard);

}  // namespace oomguard
