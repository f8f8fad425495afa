#include "allocators/caching_allocator_config.h"

#include <gtest/gtest.h>

namespace oomguard {
namespace {

constexpr int64_t kMiB = 1024 * 1024;
using Config = CachingAllocatorConfig;

Config Parse(std::string_view text) {
  std::string error;
  std::optional<Config> config = ParseCachingAllocatorConfig(text, &error);
  EXPECT_TRUE(config) << text << ": " << error;
  return config.value_or(Config{});
}

std::string ErrorOf(std::string_view text) {
  std::string error;
  EXPECT_FALSE(ParseCachingAllocatorConfig(text, &error)) << text;
  return error;
}

TEST(CachingAllocatorConfig, EmptyTextGivesPyTorchsDefaults) {
  Config config = Parse("");
  EXPECT_EQ(config.max_split_size, Config::kNoMaxSplit);
  EXPECT_EQ(config.max_non_split_rounding_size, 20 * kMiB);
  EXPECT_EQ(config.garbage_collection_threshold, 0.0);
  EXPECT_FALSE(config.expandable_segments);
  for (int64_t divisions : config.roundup_power2_divisions) EXPECT_EQ(divisions, 0);
}

TEST(CachingAllocatorConfig, ReadsEveryModelledKeyWithItsUnit) {
  Config config = Parse(
      " expandable_segments:True, max_split_size_mb:128,max_non_split_rounding_mb:64,"
      "garbage_collection_threshold:0.6,roundup_power2_divisions:4");
  EXPECT_TRUE(config.expandable_segments);
  EXPECT_EQ(config.max_split_size, 128 * kMiB);
  EXPECT_EQ(config.max_non_split_rounding_size, 64 * kMiB);
  EXPECT_EQ(config.garbage_collection_threshold, 0.6);
  for (int64_t divisions : config.roundup_power2_divisions) EXPECT_EQ(divisions, 4);
  EXPECT_TRUE(config.unmodelled_keys.empty());
}

TEST(CachingAllocatorConfig, RoundupListSetsIntervalsLikeParseRoundUpPower2Divisions) {
  // [256:1,512:2,1024:4,>:8]: 256 MiB is interval log2(256) = 8; the first entry also fills 0..7;
  // 512 -> 9, 1024 -> 10; '>' fills every interval after the last named (11..15).
  Config config = Parse("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  const std::array<int64_t, 16> expected{1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8};
  EXPECT_EQ(config.roundup_power2_divisions, expected);
  // A size's interval: 3 MiB -> floor(log2) 21 - 20 = 1; 300 MiB -> 28 - 20 = 8; 100 GiB -> 15.
  EXPECT_EQ(config.RoundupPower2Divisions(512), 1);  // below 1 MiB: interval 0
  EXPECT_EQ(config.RoundupPower2Divisions(300 * kMiB), 1);
  EXPECT_EQ(config.RoundupPower2Divisions(600 * kMiB), 2);
  EXPECT_EQ(config.RoundupPower2Divisions(100 * 1024 * kMiB), 8);
}

TEST(CachingAllocatorConfig, KnownKeysTheModelIgnoresAreListed) {
  Config config = Parse("backend:native,pinned_num_register_threads:8,release_lock_on_cudamalloc:True");
  EXPECT_EQ(config.unmodelled_keys,
            (std::vector<std::string>{"backend", "pinned_num_register_threads", "release_lock_on_cudamalloc"}));
}

TEST(CachingAllocatorConfig, BadValuesNameTheKeyAndWhatWasExpected) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"max_split_size_mb:19", "max_split_size_mb too small, must be >= 20 (MiB), got 19"},
      {"max_split_size_mb:big", "max_split_size_mb: expected a whole number of MiB >= 20, got 'big'"},
      {"garbage_collection_threshold:1.0", "garbage_collection_threshold: expected a number in (0.0, 1.0), got '1.0'"},
      {"garbage_collection_threshold:0", "garbage_collection_threshold: expected a number in (0.0, 1.0), got '0'"},
      {"expandable_segments:true", "expandable_segments: expected True or False, got 'true'"},
      {"roundup_power2_divisions:3", "roundup_power2_divisions: the divisions have to be a power of 2, got 3"},
      {"roundup_power2_divisions:[300:2]",
       "roundup_power2_divisions: the intervals have to be a power of 2 (MiB), got '300'"},
      {"roundup_power2_divisions:[256:2", "roundup_power2_divisions: expected a closing ']'"},
      {"backend:magic", "backend: expected native or cudaMallocAsync, got 'magic'"},
      {"max_split_size_mb", "expected ':' after max_split_size_mb"},
      {"expandable_segments:True:False", "expected ',' after the value of expandable_segments"},
  };
  for (const auto& [text, message] : cases) EXPECT_EQ(ErrorOf(text), "allocator config: " + std::string(message));
}

TEST(CachingAllocatorConfig, UnknownKeysAreRejectedAsCUDAAllocatorConfigDoes) {
  EXPECT_EQ(ErrorOf("max_split_size:64"),
            "allocator config: unrecognized key 'max_split_size' in the allocator config (PyTorch: \"Unrecognized key "
            "'max_split_size' in CUDA allocator config.\")");
}

}  // namespace
}  // namespace oomguard
