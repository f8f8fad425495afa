#include "memviz/pickle_writer.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace oomguard {
namespace {

// Note [Pickle opcodes] (pickle_writer.h): the only opcodes written.
constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kMark = '(';
constexpr char kNone = 'N';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kBinInt = 'J';
constexpr char kLong1 = '\x8a';
constexpr char kBinUnicode = 'X';
constexpr char kEmptyList = ']';
constexpr char kAppends = 'e';
constexpr char kEmptyDict = '}';
constexpr char kSetItems = 'u';
constexpr char kBinPut = 'q';
constexpr char kLongBinPut = 'r';
constexpr char kBinGet = 'h';
constexpr char kLongBinGet = 'j';
constexpr size_t kBatch = 1000;

void PutLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void PutInt(int64_t value, std::string* out) {
  if (value >= 0 && value < 256) {
    out->push_back(kBinInt1);
    PutLittleEndian(static_cast<uint64_t>(value), 1, out);
  } else if (value >= 0 && value < 65536) {
    out->push_back(kBinInt2);
    PutLittleEndian(static_cast<uint64_t>(value), 2, out);
  } else if (value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max()) {
    out->push_back(kBinInt);
    PutLittleEndian(static_cast<uint64_t>(value), 4, out);
  } else {
    // Fewest bytes whose top bit still carries the sign: 2^31 is 00 00 00 80 00.
    int bytes = 1;
    while (bytes < 8) {
      const int64_t high = value >> (8 * bytes - 1);  // arithmetic shift: 0 or -1 once it fits
      if (high == 0 || high == -1) break;
      ++bytes;
    }
    out->push_back(kLong1);
    out->push_back(static_cast<char>(bytes));
    PutLittleEndian(static_cast<uint64_t>(value), bytes, out);
  }
}

void PutString(const std::string& value, std::string* out) {
  out->push_back(kBinUnicode);
  PutLittleEndian(value.size(), 4, out);
  out->append(value);
}

// Writes values into out, remembering the shared ones it has written (their memo ids).
class Encoder {
 public:
  explicit Encoder(std::string* out) : out_(out) {}

  void Put(const PickleValue& value) {
    std::visit([this](const auto& v) { PutAlternative(v); }, value.value());
  }

 private:
  void PutAlternative(std::monostate) { out_->push_back(kNone); }
  void PutAlternative(bool b) { out_->push_back(b ? kNewTrue : kNewFalse); }
  void PutAlternative(int64_t i) { PutInt(i, out_); }
  void PutAlternative(const std::string& s) { PutString(s, out_); }
  void PutAlternative(const PickleValue::List& list) {
    out_->push_back(kEmptyList);
    PutBatches(list, kAppends, [this](const PickleValue& item) { Put(item); });
  }
  void PutAlternative(const PickleValue::Dict& dict) {
    out_->push_back(kEmptyDict);
    PutBatches(dict, kSetItems, [this](const std::pair<std::string, PickleValue>& item) {
      PutString(item.first, out_);
      Put(item.second);
    });
  }
  void PutAlternative(const PickleValue::Shared& shared) {
    if (!shared) return PutAlternative(std::monostate{});
    const auto found = memo_.find(shared.get());
    if (found != memo_.end()) return PutMemo(kBinGet, kLongBinGet, found->second);
    Put(*shared);
    const auto id = static_cast<uint32_t>(memo_.size());
    memo_.emplace(shared.get(), id);
    PutMemo(kBinPut, kLongBinPut, id);
  }

  void PutMemo(char short_op, char long_op, uint32_t id) {
    out_->push_back(id < 256 ? short_op : long_op);
    PutLittleEndian(id, id < 256 ? 1 : 4, out_);
  }

  // Items in batches: MARK item... APPENDS (or MARK key value... SETITEMS).
  template <typename Items, typename PutItem>
  void PutBatches(const Items& items, char closing, const PutItem& put_item) {
    for (size_t begin = 0; begin < items.size(); begin += kBatch) {
      out_->push_back(kMark);
      const size_t end = std::min(items.size(), begin + kBatch);
      for (size_t i = begin; i < end; ++i) put_item(items[i]);
      out_->push_back(closing);
    }
  }

  std::string* out_;
  std::unordered_map<const PickleValue*, uint32_t> memo_;
};

}  // namespace

std::string Pickle(const PickleValue& value) {
  std::string out = {kProto, '\x02'};
  Encoder(&out).Put(value);
  out.push_back(kStop);
  return out;
}

}  // namespace oomguard
