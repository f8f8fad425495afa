// A run's shard (base/shard.h): --shard's text, GoogleTest's variables and status file, the deal of
// positions, and "{shard}" in report paths.
#include "base/shard.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "tests/scoped_environment.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

std::string Parsed(const std::string& text) {
  Shard shard{7, 7};
  std::string error;
  if (!ParseShard(text, &shard, &error)) return error;
  return std::to_string(shard.index) + " of " + std::to_string(shard.count);
}

std::string Expected(const std::string& got) {
  return "expected INDEX/COUNT with 1 <= INDEX <= COUNT, such as 2/3; got '" + got + "'";
}

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

TEST(Shard, ParsesIndexOverCount) {
  EXPECT_EQ(Parsed("1/3"), "1 of 3");
  EXPECT_EQ(Parsed("3/3"), "3 of 3");
  EXPECT_EQ(Parsed("1/1"), "1 of 1");
  EXPECT_EQ(Parsed("12/40"), "12 of 40");
  EXPECT_EQ(Parsed("02/3"), "2 of 3");
}

TEST(Shard, EveryMalformedFormIsRefusedWithWhatWasExpected) {
  for (const std::string bad : {"0/3", "4/3", "1/0", "x", "1/", "-1/3", "", "/3", "1/-3", "+1/3", "1/3/", " 1/3",
                                "1/3 ", "1.0/3", "2", "1/99999999999", "1,3"}) {
    EXPECT_EQ(Parsed(bad), Expected(bad)) << bad;
  }
}

TEST(Shard, TheFlagsErrorsNameTheFlag) {
  Shard shard;
  std::string error;
  EXPECT_FALSE(ResolveShard(std::string("4/3"), /*gtest_variables=*/false, &shard, &error));
  EXPECT_EQ(error, "--shard: expected INDEX/COUNT with 1 <= INDEX <= COUNT, such as 2/3; got '4/3'");
  ASSERT_TRUE(ResolveShard(std::string("2/3"), false, &shard, &error)) << error;
  EXPECT_EQ(ShardName(shard), "2/3");
  ASSERT_TRUE(ResolveShard(std::nullopt, false, &shard, &error)) << error;
  EXPECT_FALSE(shard.Sharded());
  EXPECT_EQ(ShardName(shard), "");
}

TEST(Shard, DealsPositionsRoundRobin) {
  std::ostringstream deal;
  for (size_t k = 0; k < 8; ++k) {
    for (int index = 1; index <= 3; ++index) deal << (Shard{index, 3}.Takes(k) ? std::to_string(index) : "");
  }
  EXPECT_EQ(deal.str(), "12312312");
  for (size_t k = 0; k < 8; ++k) EXPECT_TRUE(Shard{}.Takes(k)) << k;
  for (size_t k = 0; k < 8; ++k) EXPECT_TRUE((Shard{1, 1}.Takes(k))) << k;
}

TEST(ShardPath, ReplacesEveryPlaceholderByTheShardOrAll) {
  EXPECT_EQ(ShardPath("junit-{shard}.xml", Shard{2, 3}), "junit-2-of-3.xml");
  EXPECT_EQ(ShardPath("junit-{shard}.xml", Shard{}), "junit-all.xml");
  EXPECT_EQ(ShardPath("{shard}/results-{shard}.json", Shard{10, 12}), "10-of-12/results-10-of-12.json");
  EXPECT_EQ(ShardPath("{shard}", Shard{1, 1}), "1-of-1");
  EXPECT_EQ(ShardPath("junit.xml", Shard{2, 3}), "junit.xml");
  EXPECT_EQ(ShardPath("a{shard-{Shard}{shard", Shard{2, 3}), "a{shard-{Shard}{shard");
  EXPECT_EQ(ShardPath("{{shard}}", Shard{2, 3}), "{2-of-3}");
  EXPECT_EQ(ShardPath("", Shard{2, 3}), "");
}

// Each test starts with none of GoogleTest's sharding variables and leaves them as they were.
class GTestSharding : public ::testing::Test {
 protected:
  // What ResolveShard makes of the variables for `oomguard run`: "2/3", "" (not sharded), or the error.
  std::string Resolved(const std::optional<std::string>& flag = std::nullopt) {
    Shard shard{7, 7};
    std::string error;
    if (!ResolveShard(flag, /*gtest_variables=*/true, &shard, &error)) return error;
    return ShardName(shard);
  }
  testing::ScopedEnvironment env_{{"GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX", "GTEST_SHARD_STATUS_FILE"}};
  testing::ScratchFolder folder_{"shard"};
};

TEST_F(GTestSharding, WithoutTheVariablesTheRunIsNotSharded) { EXPECT_EQ(Resolved(), ""); }

TEST_F(GTestSharding, ZeroBasedIndexBecomesOneBasedShard) {
  env_.Set("GTEST_TOTAL_SHARDS", "3");
  env_.Set("GTEST_SHARD_INDEX", "0");
  EXPECT_EQ(Resolved(), "1/3");
  env_.Set("GTEST_SHARD_INDEX", "2");
  EXPECT_EQ(Resolved(), "3/3");
  env_.Set("GTEST_TOTAL_SHARDS", "1");
  env_.Set("GTEST_SHARD_INDEX", "0");
  EXPECT_EQ(Resolved(), "1/1");
}

TEST_F(GTestSharding, TheFlagWinsAndOtherCommandsIgnoreTheVariables) {
  env_.Set("GTEST_TOTAL_SHARDS", "3");
  env_.Set("GTEST_SHARD_INDEX", "9");  // invalid, and not read
  EXPECT_EQ(Resolved(std::string("2/4")), "2/4");
  Shard shard{7, 7};
  std::string error;
  ASSERT_TRUE(ResolveShard(std::nullopt, /*gtest_variables=*/false, &shard, &error)) << error;
  EXPECT_FALSE(shard.Sharded());
}

TEST_F(GTestSharding, InvalidValuesNameTheVariable) {
  const std::string index_range = "GTEST_SHARD_INDEX: expected a whole number from 0 to 2 (GTEST_TOTAL_SHARDS is 3), ";
  env_.Set("GTEST_TOTAL_SHARDS", "3");
  for (const std::string bad : {"3", "-1", "x", "", "1 "}) {
    env_.Set("GTEST_SHARD_INDEX", bad);
    EXPECT_EQ(Resolved(), index_range + "got '" + bad + "'") << bad;
  }
  env_.Set("GTEST_SHARD_INDEX", "0");
  for (const std::string bad : {"0", "-3", "three", ""}) {
    env_.Set("GTEST_TOTAL_SHARDS", bad);
    EXPECT_EQ(Resolved(), "GTEST_TOTAL_SHARDS: expected a whole number >= 1, got '" + bad + "'") << bad;
  }
}

TEST_F(GTestSharding, OneVariableWithoutTheOtherIsAnError) {
  env_.Set("GTEST_SHARD_INDEX", "1");
  EXPECT_EQ(Resolved(),
            "GTEST_SHARD_INDEX is set ('1') but GTEST_TOTAL_SHARDS is not: GoogleTest's sharding needs both");
  unsetenv("GTEST_SHARD_INDEX");
  env_.Set("GTEST_TOTAL_SHARDS", "3");
  EXPECT_EQ(Resolved(),
            "GTEST_TOTAL_SHARDS is set ('3') but GTEST_SHARD_INDEX is not: GoogleTest's sharding needs both");
}

TEST_F(GTestSharding, TheStatusFileIsCreatedWhenTheVariablesDecide) {
  const std::string status = folder_.path() + "/status";
  env_.Set("GTEST_SHARD_STATUS_FILE", status);
  env_.Set("GTEST_TOTAL_SHARDS", "2");
  env_.Set("GTEST_SHARD_INDEX", "1");
  EXPECT_EQ(Resolved(std::string("1/2")), "1/2");
  EXPECT_FALSE(Exists(status)) << "--shard overrode the variables: the runner must not be told they were honoured";
  EXPECT_EQ(Resolved(), "2/2");
  EXPECT_TRUE(Exists(status));
}

TEST_F(GTestSharding, TheStatusFileIsCreatedWithoutShardsTooAndKeepsWhatItHeld) {
  const std::string status = folder_.path() + "/status";
  env_.Set("GTEST_SHARD_STATUS_FILE", status);
  EXPECT_EQ(Resolved(), "");  // as GoogleTest: the variable alone asks whether sharding is supported
  EXPECT_TRUE(Exists(status));
  std::ofstream(status) << "runner's\n";
  EXPECT_EQ(Resolved(), "");
  std::ifstream in(status);
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "runner's\n");  // touched, not truncated
}

TEST_F(GTestSharding, AStatusFileThatCannotBeCreatedIsAnErrorNamingTheVariable) {
  const std::string status = folder_.path() + "/missing/status";
  env_.Set("GTEST_SHARD_STATUS_FILE", status);
  env_.Set("GTEST_TOTAL_SHARDS", "2");
  env_.Set("GTEST_SHARD_INDEX", "0");
  EXPECT_EQ(Resolved(), "GTEST_SHARD_STATUS_FILE: cannot create '" + status + "': No such file or directory");
}

TEST_F(GTestSharding, InvalidVariablesLeaveNoStatusFile) {
  const std::string status = folder_.path() + "/status";
  env_.Set("GTEST_SHARD_STATUS_FILE", status);
  env_.Set("GTEST_TOTAL_SHARDS", "2");
  env_.Set("GTEST_SHARD_INDEX", "2");
  EXPECT_EQ(Resolved(), "GTEST_SHARD_INDEX: expected a whole number from 0 to 1 (GTEST_TOTAL_SHARDS is 2), got '2'");
  EXPECT_FALSE(Exists(status));
}

}  // namespace
}  // namespace oomguard
