#include "base/byte_size.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace oomguard {
namespace {

constexpr std::string_view kAccepted =
    "expected a size such as 16GiB, 15.5GB, 512MiB, 4096 or 1e9 (units: B, KB, MB, GB, TB, KiB, MiB, "
    "GiB, TiB)";

bool UnitMultiplier(std::string_view unit, double* multiplier) {
  std::string lower;
  for (char c : unit) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  struct Unit {
    std::string_view name;
    double multiplier;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},      {"b", 1},        {"kb", 1e3},        {"mb", 1e6},           {"gb", 1e9},
      {"tb", 1e12}, {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
  };
  for (const Unit& u : kUnits) {
    if (lower == u.name) {
      *multiplier = u.multiplier;
      return true;
    }
  }
  return false;
}

}  // namespace

bool ParseByteSize(std::string_view text, int64_t* bytes, std::string* error) {
  const std::string quoted = "'" + std::string(text) + "'";
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' || text[i] == 'e' ||
                             text[i] == 'E' || text[i] == '+' || text[i] == '-')) {
    // An 'e' only belongs to the number when a digit or sign follows ("1e9"), not in "1eb".
    if ((text[i] == 'e' || text[i] == 'E') &&
        !(i + 1 < text.size() &&
          (std::isdigit(static_cast<unsigned char>(text[i + 1])) || text[i + 1] == '+' || text[i + 1] == '-'))) {
      break;
    }
    ++i;
  }
  std::string_view number = text.substr(0, i);
  std::string_view unit = text.substr(i);
  if (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);

  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size()) {
    *error = "invalid size " + quoted + ": " + std::string(kAccepted);
    return false;
  }
  double multiplier = 1;
  if (!UnitMultiplier(unit, &multiplier)) {
    *error = "invalid size " + quoted + ": unknown unit '" + std::string(unit) + "'; " + std::string(kAccepted);
    return false;
  }
  if (value < 0) {
    *error = "invalid size " + quoted + ": a size cannot be negative";
    return false;
  }
  const double total = value * multiplier;
  if (!std::isfinite(total) || total >= 9.2e18) {
    *error = "invalid size " + quoted + ": too large";
    return false;
  }
  // Round away representation noise ("15.5GB" is 15500000000 exactly) but refuse real fractions.
  const double rounded = std::nearbyint(total);
  if (std::fabs(total - rounded) > total * 1e-12 + 1e-9) {
    *error = "invalid size " + quoted + ": not a whole number of bytes";
    return false;
  }
  *bytes = static_cast<int64_t>(rounded);
  return true;
}

std::string FormatBytes(int64_t bytes) {
  char buffer[64];
  const double b = static_cast<double>(bytes);
  const uint64_t magnitude = bytes < 0 ? 0 - static_cast<uint64_t>(bytes) : static_cast<uint64_t>(bytes);
  if (magnitude <= 1024) {
    std::snprintf(buffer, sizeof buffer, "%lld bytes", static_cast<long long>(bytes));
  } else if (magnitude <= 1048576) {
    std::snprintf(buffer, sizeof buffer, "%.2f KiB", b / 1024.0);
  } else if (magnitude <= 1073741824LL) {
    std::snprintf(buffer, sizeof buffer, "%.2f MiB", b / 1048576.0);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.2f GiB", b / 1073741824.0);
  }
  return buffer;
}

std::string FormatSignedBytes(int64_t bytes) {
  if (bytes > 0) return "+" + FormatBytes(bytes);
  return FormatBytes(bytes);
}

}  // namespace oomguard
