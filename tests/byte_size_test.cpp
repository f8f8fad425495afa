#include "base/byte_size.h"

#include <gtest/gtest.h>

namespace oomguard {
namespace {

int64_t Parse(const std::string& text) {
  int64_t bytes = -1;
  std::string error;
  EXPECT_TRUE(ParseByteSize(text, &bytes, &error)) << text << ": " << error;
  return bytes;
}

std::string ParseError(const std::string& text) {
  int64_t bytes = -1;
  std::string error;
  EXPECT_FALSE(ParseByteSize(text, &bytes, &error)) << text << " parsed as " << bytes;
  return error;
}

TEST(ByteSize, ParsesTheFormsUsersWrite) {
  EXPECT_EQ(Parse("16GiB"), 17179869184);
  EXPECT_EQ(Parse("15.5GB"), 15500000000);
  EXPECT_EQ(Parse("512MiB"), 536870912);
  EXPECT_EQ(Parse("1e9"), 1000000000);
  EXPECT_EQ(Parse("4096"), 4096);
  EXPECT_EQ(Parse("4096B"), 4096);
  EXPECT_EQ(Parse("16 GiB"), 17179869184);
  EXPECT_EQ(Parse("1.5KiB"), 1536);
  EXPECT_EQ(Parse("2kb"), 2000);
  EXPECT_EQ(Parse("12gib"), 12884901888);
  EXPECT_EQ(Parse("1TiB"), 1099511627776);
  EXPECT_EQ(Parse("2.5e3MB"), 2500000000);
  EXPECT_EQ(Parse("0"), 0);
}

constexpr const char* kAccepted =
    "expected a size such as 16GiB, 15.5GB, 512MiB, 4096 or 1e9 (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)";

TEST(ByteSize, RejectsMalformedSizesSayingWhatIsAccepted) {
  EXPECT_EQ(ParseError("12XB"), std::string("invalid size '12XB': unknown unit 'XB'; ") + kAccepted);
  EXPECT_EQ(ParseError("16G"), std::string("invalid size '16G': unknown unit 'G'; ") + kAccepted);
  EXPECT_EQ(ParseError(""), std::string("invalid size '': ") + kAccepted);
  EXPECT_EQ(ParseError("GiB"), std::string("invalid size 'GiB': ") + kAccepted);
  EXPECT_EQ(ParseError("1.2.3GB"), std::string("invalid size '1.2.3GB': ") + kAccepted);
  EXPECT_EQ(ParseError("-1GiB"), "invalid size '-1GiB': a size cannot be negative");
  EXPECT_EQ(ParseError("0.5B"), "invalid size '0.5B': not a whole number of bytes");
  EXPECT_EQ(ParseError("1e-3"), "invalid size '1e-3': not a whole number of bytes");
  EXPECT_EQ(ParseError("1e30"), "invalid size '1e30': too large");
  EXPECT_EQ(ParseError("16  GiB"), std::string("invalid size '16  GiB': unknown unit ' GiB'; ") + kAccepted);
}

TEST(ByteSize, FormatsLikePyTorchOomMessages) {
  EXPECT_EQ(FormatBytes(0), "0 bytes");
  EXPECT_EQ(FormatBytes(1024), "1024 bytes");
  EXPECT_EQ(FormatBytes(1025), "1.00 KiB");
  EXPECT_EQ(FormatBytes(1048576), "1024.00 KiB");
  EXPECT_EQ(FormatBytes(3 * 1048576), "3.00 MiB");
  EXPECT_EQ(FormatBytes(15828254720), "14.74 GiB");
  EXPECT_EQ(FormatSignedBytes(1536), "+1.50 KiB");
  EXPECT_EQ(FormatSignedBytes(-512), "-512 bytes");
  EXPECT_EQ(FormatSignedBytes(-3 * 1048576), "-3.00 MiB");
}

}  // namespace
}  // namespace oomguard
