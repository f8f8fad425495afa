// Spelling suggestions for error messages, shared by the scenario loader and the check expressions:
//
//   std::string near = oomguard::ClosestMatch("no_grd", {"batches", "no_grad", "keep_outputs"});  // "no_grad"
//   oomguard::JoinNames({"a", "b"}, ", ")                                                        // "a, b"
//
// Header-only; nothing here can fail.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace oomguard {

// Optimal string alignment distance, case-insensitive: insertions, deletions, substitutions and swaps of
// two neighbouring characters each count one ("lienar" is one edit from "linear").
inline size_t EditDistance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

// The candidate nearest to `word` when it is near enough to be a typo of it (at most 1 edit for words
// up to 4 characters, 2 up to 8, 3 beyond), else "". Ties go to the earlier candidate.
inline std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  const size_t limit = word.size() <= 4 ? 1 : word.size() <= 8 ? 2 : 3;
  std::string best;
  size_t best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = EditDistance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

inline std::string JoinNames(const std::vector<std::string>& names, std::string_view separator) {
  std::string joined;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) joined += separator;
    joined += names[i];
  }
  return joined;
}

}  // namespace oomguard
