// A small Python pickle encoder for the values a memory snapshot holds: None, bool, int, str, list
// and dict with str keys (in insertion order), and shared values: a value many places hold (the
// frames of thousands of trace entries) is written once and referenced after, as Python's own
// pickler does through its memo.
//
//   oomguard::PickleValue::Dict d;
//   d.emplace_back("action", "alloc");
//   d.emplace_back("size", int64_t{4096});
//   std::string bytes = oomguard::Pickle(oomguard::PickleValue(std::move(d)));
//   // python: pickle.loads(bytes) == {"action": "alloc", "size": 4096}
//
// Note [Pickle opcodes]: the output must load in Python (pickle.load) and in pytorch.org/memory_viz,
// whose JavaScript unpickler (torch/utils/viz/MemoryViz.js, `unpickle`) understands only PROTO (2-4),
// FRAME, STOP, MARK, NONE, NEWTRUE, NEWFALSE, BININT, BININT1, BININT2, LONG1, SHORT_BINUNICODE,
// BINUNICODE, BINFLOAT, EMPTY_LIST, APPEND, APPENDS, LIST, EMPTY_DICT, SETITEM, SETITEMS, DICT,
// EMPTY_TUPLE, TUPLE, TUPLE1-3, BINPUT, LONG_BINPUT, MEMOIZE, BINGET and LONG_BINGET. We write
// protocol 2 with: PROTO 2, NONE, NEWTRUE, NEWFALSE, BININT1 (0..255), BININT2 (256..65535), BININT
// (other 32-bit values), LONG1 (the rest, little-endian two's complement in the fewest bytes, as
// Python writes it), BINUNICODE (UTF-8), EMPTY_LIST + MARK + APPENDS, EMPTY_DICT + MARK + SETITEMS,
// STOP, and for shared values BINPUT / LONG_BINPUT (memo ids from 256) when first written, BINGET /
// LONG_BINGET after. Lists and dicts are written in batches of 1000, as Python does:
// the JavaScript APPENDS spreads a batch into one call's arguments, which fails past ~100k of them.
//
// Error policy: none; every PickleValue encodes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace oomguard {

class PickleValue {
 public:
  using List = std::vector<PickleValue>;
  using Dict = std::vector<std::pair<std::string, PickleValue>>;

  PickleValue() = default;  // None
  PickleValue(bool value) : value_(value) {}
  PickleValue(int64_t value) : value_(value) {}
  PickleValue(int value) : value_(int64_t{value}) {}
  PickleValue(std::string value) : value_(std::move(value)) {}
  PickleValue(const char* value) : value_(std::string(value)) {}
  PickleValue(List value) : value_(std::move(value)) {}
  PickleValue(Dict value) : value_(std::move(value)) {}
  // Written once per Pickle call; every later occurrence of the same pointer refers back to it.
  using Shared = std::shared_ptr<const PickleValue>;
  PickleValue(Shared value) : value_(std::move(value)) {}

  // Alternatives in this order: None, bool, int, str, list, dict, shared.
  using Variant = std::variant<std::monostate, bool, int64_t, std::string, List, Dict, Shared>;
  const Variant& value() const { return value_; }

 private:
  Variant value_;
};

// The pickle of value, protocol 2, ending with STOP.
std::string Pickle(const PickleValue& value);

}  // namespace oomguard
