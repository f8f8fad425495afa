#include "fit/knob_values.h"

#include <algorithm>
#include <bit>

#include "base/check.h"

namespace oomguard {
namespace {

uint64_t Unsigned(int64_t v) { return static_cast<uint64_t>(v); }

}  // namespace

KnobValues::KnobValues(int64_t min, int64_t max, int64_t per_node) : per_node_(per_node) {
  OOMGUARD_CHECK(min >= 1 && per_node >= 1 && std::has_single_bit(Unsigned(per_node)))
      << "KnobValues: needs min >= 1 and a power-of-two per_node, got min " << min << ", per_node " << per_node;
  node_bits_ = std::bit_width(Unsigned(per_node)) - 1;
  if (max < 1) return;
  first_ = Ceil(min);
  last_ = Floor(max);
}

int64_t KnobValues::first() const {
  OOMGUARD_CHECK(!empty()) << "KnobValues::first of an empty set";
  return *first_;
}

int64_t KnobValues::last() const {
  OOMGUARD_CHECK(!empty()) << "KnobValues::last of an empty set";
  return *last_;
}

int64_t KnobValues::Ceil(int64_t value) const {
  if (value <= per_node_) return static_cast<int64_t>(std::bit_ceil(Unsigned(std::max<int64_t>(value, 1))));
  return (value + per_node_ - 1) / per_node_ * per_node_;
}

int64_t KnobValues::Floor(int64_t value) const {
  if (value < per_node_) return static_cast<int64_t>(std::bit_floor(Unsigned(value)));
  return value / per_node_ * per_node_;
}

int64_t KnobValues::Index(int64_t ladder_value) const {
  if (ladder_value < per_node_) return std::bit_width(Unsigned(ladder_value)) - 1;
  return node_bits_ + ladder_value / per_node_ - 1;
}

int64_t KnobValues::At(int64_t index) const {
  if (index < node_bits_) return int64_t{1} << index;
  return (index - node_bits_ + 1) * per_node_;
}

bool KnobValues::Contains(int64_t value) const {
  return !empty() && value >= *first_ && value <= *last_ && Ceil(value) == value;
}

int64_t KnobValues::Doubled(int64_t value) const {
  OOMGUARD_CHECK(Contains(value)) << "KnobValues::Doubled: " << value << " is not a value of the set";
  const int64_t doubled = value > *last_ / 2 ? *last_ : Ceil(value * 2);
  return std::min(doubled, *last_);
}

std::optional<int64_t> KnobValues::Middle(int64_t low, int64_t high) const {
  OOMGUARD_CHECK(Contains(low) && Contains(high) && low < high)
      << "KnobValues::Middle: needs two values of the set, low < high, got " << low << ", " << high;
  const int64_t il = Index(low), ih = Index(high);
  if (ih - il <= 1) return std::nullopt;
  return At(il + (ih - il) / 2);
}

}  // namespace oomguard
