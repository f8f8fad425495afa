// One Name()/Parse() pair for every closed set oomguard spells as words (outcomes, error categories,
// phases, dtypes): an enum declares its spellings once, in a specialisation of EnumNames, and every
// message, JSON binding and CLI choice list takes them from there.
//
//   enum class Phase { kSetup, kForward };
//   template <> struct EnumNames<Phase> {
//     static constexpr std::array<std::string_view, 2> kNames = {"setup", "forward"};  // in enum order
//   };
//   Name(Phase::kForward);                 // "forward"
//   Phase p;
//   if (!Parse("forwrd", &p)) { ... }      // false: not a name of the set
//   AllNames<Phase>();                     // {"setup", "forward"}: for messages and CLI11's IsMember
//
// The enum's values must be 0, 1, ... N-1 in the order of kNames. Header-only; nothing here throws.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace oomguard {

// Specialised next to each enum: `static constexpr std::array<std::string_view, N> kNames`.
template <typename E>
struct EnumNames;

template <typename E>
concept NamedEnum = std::is_enum_v<E> && requires {
  EnumNames<E>::kNames;
};

template <NamedEnum E>
constexpr std::string_view Name(E value) {
  return EnumNames<E>::kNames[static_cast<size_t>(value)];
}

// Exact, case-sensitive: the spellings of scenario files and results JSON.
template <NamedEnum E>
[[nodiscard]] constexpr bool Parse(std::string_view text, E* out) {
  for (size_t i = 0; i < EnumNames<E>::kNames.size(); ++i) {
    if (EnumNames<E>::kNames[i] == text) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

// Every value, in enum order.
template <NamedEnum E>
std::vector<E> AllValues() {
  std::vector<E> values;
  for (size_t i = 0; i < EnumNames<E>::kNames.size(); ++i) values.push_back(static_cast<E>(i));
  return values;
}

// The names of `values` (all of them by default), in that order.
template <NamedEnum E>
std::vector<std::string> AllNames(const std::vector<E>& values = AllValues<E>()) {
  std::vector<std::string> names;
  for (E value : values) names.emplace_back(Name(value));
  return names;
}

}  // namespace oomguard
