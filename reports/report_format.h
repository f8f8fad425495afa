// Number formatting the report writers share, so every format prints a diff the same way.
// Header-only; nothing here can fail.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "base/byte_size.h"
#include "model/metric_names.h"

namespace oomguard {

// "+11.1%", "-3.0%", and "0.0%" (never "-0.0%").
inline std::string FormatPercent(double percent) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%+.1f%%", percent);
  const std::string s = buffer;
  return s == "+0.0%" || s == "-0.0%" ? "0.0%" : s;
}

// "2.3 s": a duration as the console, Markdown, HTML and fit outputs print it.
inline std::string FormatSeconds(double ms) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f s", ms / 1000.0);
  return buffer;
}

// What a scenario ran under, in a few characters: the card's name ("T4"), else "cap 12.00 MiB", else ""
// (no limit).
inline std::string CardOrCap(const std::string& card, int64_t cap_bytes) {
  if (!card.empty()) return card;
  return cap_bytes > 0 ? "cap " + FormatBytes(cap_bytes) : "";
}

// `s` padded with spaces to `width` characters (left-aligned table cells).
inline std::string PadRight(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// A baseline metric's value ("peak_bytes", "phase_peak.backward", "live_after[2]", "alloc_count"):
// bytes with FormatBytes, counts as numbers; is_signed for deltas.
inline std::string FormatMetricValue(const std::string& metric, int64_t value, bool is_signed) {
  const std::string base = metric.substr(0, metric.find_first_of(".["));
  if (FindMetricKind(base) != MetricKind::kCount) return is_signed ? FormatSignedBytes(value) : FormatBytes(value);
  return (is_signed && value > 0 ? "+" : "") + std::to_string(value);
}

}  // namespace oomguard
