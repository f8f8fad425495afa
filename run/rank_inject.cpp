#include "run/rank_inject.h"

#include <charconv>

namespace oomguard {

bool SplitRankClause(std::string_view spec, std::optional<int64_t>* rank, std::string* rest, std::string* error) {
  rank->reset();
  rest->clear();
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string_view clause = spec.substr(start, comma - start);
    if (clause.substr(0, 5) == "rank=") {
      const std::string_view value = clause.substr(5);
      int64_t r = -1;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), r);
      if (ec != std::errc() || end != value.data() + value.size() || r < 0) {
        *error = "invalid fault spec '" + std::string(spec) + "': rank must be a whole number >= 0, got '" +
                 std::string(value) + "'";
        return false;
      }
      if (rank->has_value()) {
        *error = "invalid fault spec '" + std::string(spec) + "': rank is given twice";
        return false;
      }
      *rank = r;
    } else {
      if (!rest->empty()) *rest += ',';  // appended, not "," + clause: GCC 12's -Wstringop-overflow (PR 88443)
      *rest += clause;
    }
    start = comma + 1;
  }
  return true;
}

std::vector<std::string> InjectionForRank(const std::vector<std::string>& specs, int64_t rank) {
  std::vector<std::string> mine;
  for (const std::string& spec : specs) {
    std::optional<int64_t> r;
    std::string rest, ignored;
    if (!SplitRankClause(spec, &r, &rest, &ignored)) {
      mine.push_back(spec);
    } else if (!r || *r == rank) {
      mine.push_back(r ? rest : spec);
    }
  }
  return mine;
}

std::vector<std::string> InjectionForNoRank(const std::vector<std::string>& specs, int64_t world) {
  std::vector<std::string> warnings;
  for (const std::string& spec : specs) {
    std::optional<int64_t> r;
    std::string rest, ignored;
    if (!SplitRankClause(spec, &r, &rest, &ignored) || !r || *r < world) continue;
    warnings.push_back("--inject " + spec + ": this variant has " +
                       (world == 1 ? std::string("rank 0 only (no parallel)")
                                   : "ranks 0.." + std::to_string(world - 1) + " (world " + std::to_string(world) + ")") +
                       ": nothing was injected");
  }
  return warnings;
}

}  // namespace oomguard
