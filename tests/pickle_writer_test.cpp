// The pickle encoder: exact bytes for a known dict (checked by hand against the pickle opcode table
// and Python's pickletools), the value read back, batching and the memo.
#include "memviz/pickle_writer.h"

#include <gtest/gtest.h>

#include "tests/pickle_reader.h"

namespace oomguard {
namespace {

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

// BINUNICODE of a short ASCII string.
std::string Str(const std::string& s) { return Bytes({'X', static_cast<int>(s.size()), 0, 0, 0}) + s; }

TEST(PickleWriter, KnownDictGivesKnownBytes) {
  PickleValue::Dict d;
  d.emplace_back("n", PickleValue());
  d.emplace_back("t", true);
  d.emplace_back("f", false);
  d.emplace_back("k", 7);
  d.emplace_back("m", 300);
  d.emplace_back("j", -1);
  d.emplace_back("l", int64_t{1} << 31);
  d.emplace_back("s", "h\xc3\xa9");
  d.emplace_back("x", PickleValue::List{1, "a"});
  d.emplace_back("e", PickleValue::Dict{});
  d.emplace_back("z", PickleValue::List{});
  const std::string expected = Bytes({0x80, 2, '}', '('}) +                             //
                               Str("n") + "N" +                                         //
                               Str("t") + Bytes({0x88}) +                               //
                               Str("f") + Bytes({0x89}) +                               //
                               Str("k") + Bytes({'K', 7}) +                             //
                               Str("m") + Bytes({'M', 0x2c, 0x01}) +                    //
                               Str("j") + Bytes({'J', 0xff, 0xff, 0xff, 0xff}) +        //
                               Str("l") + Bytes({0x8a, 5, 0, 0, 0, 0x80, 0}) +          //
                               Str("s") + Bytes({'X', 3, 0, 0, 0, 'h', 0xc3, 0xa9}) +   //
                               Str("x") + Bytes({']', '(', 'K', 1}) + Str("a") + "e" +  //
                               Str("e") + "}" +                                         //
                               Str("z") + "]" +                                         //
                               "u.";
  const std::string bytes = Pickle(PickleValue(std::move(d)));
  EXPECT_EQ(bytes, expected);
  EXPECT_EQ(testing::RenderPickle(bytes),
            "{'n': None, 't': True, 'f': False, 'k': 7, 'm': 300, 'j': -1, 'l': 2147483648, 's': 'h\xc3\xa9', "
            "'x': [1, 'a'], 'e': {}, 'z': []}");
}

TEST(PickleWriter, IntegersTakeTheSmallestOpcode) {
  auto body = [](int64_t v) {
    const std::string p = Pickle(PickleValue(v));
    return p.substr(2, p.size() - 3);  // without PROTO 2 and STOP
  };
  EXPECT_EQ(body(0), Bytes({'K', 0}));
  EXPECT_EQ(body(255), Bytes({'K', 0xff}));
  EXPECT_EQ(body(256), Bytes({'M', 0, 1}));
  EXPECT_EQ(body(65535), Bytes({'M', 0xff, 0xff}));
  EXPECT_EQ(body(65536), Bytes({'J', 0, 0, 1, 0}));
  EXPECT_EQ(body(-2147483648LL), Bytes({'J', 0, 0, 0, 0x80}));
  EXPECT_EQ(body(-2147483649LL), Bytes({0x8a, 5, 0xff, 0xff, 0xff, 0x7f, 0xff}));
  EXPECT_EQ(body(int64_t{1} << 40), Bytes({0x8a, 6, 0, 0, 0, 0, 0, 1}));  // an address above 4 GiB
  EXPECT_EQ(body(INT64_MAX), Bytes({0x8a, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}));
  EXPECT_EQ(body(INT64_MIN), Bytes({0x8a, 8, 0, 0, 0, 0, 0, 0, 0, 0x80}));
  EXPECT_EQ(testing::RenderPickle(Pickle(PickleValue(INT64_MIN))), "-9223372036854775808");
}

TEST(PickleWriter, LongListsAreWrittenInBatchesOfAThousand) {
  PickleValue::List list(2500, PickleValue(1));
  const std::string bytes = Pickle(PickleValue(std::move(list)));
  // ']' then three MARK ... APPENDS batches of 1000, 1000 and 500 items of 2 bytes each.
  EXPECT_EQ(bytes.size(), 2u + 1u + 3u * 2u + 2500u * 2u + 1u);
  EXPECT_EQ(bytes.substr(2, 2), "](");
  EXPECT_EQ(bytes[2 + 2 + 2000], 'e');
  EXPECT_EQ(bytes[2 + 2 + 2000 + 1], '(');
  const std::string rendered = testing::RenderPickle(bytes);
  EXPECT_EQ(rendered.size(), 2u + 2500u + 2499u * 2u);  // "[1, 1, ..., 1]"
}

TEST(PickleWriter, SharedValuesAreWrittenOnceThenReferenced) {
  const auto frames = std::make_shared<const PickleValue>(PickleValue::List{"f"});
  const std::string bytes = Pickle(PickleValue(PickleValue::List{frames, frames}));
  const std::string expected = Bytes({0x80, 2, ']', '(', ']', '('}) + Str("f") + Bytes({'e', 'q', 0, 'h', 0}) + "e.";
  EXPECT_EQ(bytes, expected);
  EXPECT_EQ(testing::RenderPickle(bytes), "[['f'], ['f']]");
}

TEST(PickleWriter, MemoIdsPast255UseTheLongForms) {
  PickleValue::List list;
  std::vector<PickleValue::Shared> shared;
  for (int i = 0; i < 300; ++i) shared.push_back(std::make_shared<const PickleValue>(i));
  for (const auto& s : shared) list.emplace_back(s);
  list.emplace_back(shared[299]);  // memo id 299: LONG_BINGET
  const std::string bytes = Pickle(PickleValue(std::move(list)));
  EXPECT_NE(bytes.find(Bytes({'r', 0x2b, 0x01, 0, 0})), std::string::npos);  // LONG_BINPUT 299
  EXPECT_EQ(bytes.substr(bytes.size() - 7), Bytes({'j', 0x2b, 0x01, 0, 0, 'e', '.'}));
  const std::string rendered = testing::RenderPickle(bytes);
  EXPECT_EQ(rendered.substr(rendered.size() - 14), "298, 299, 299]");
}

}  // namespace
}  // namespace oomguard
