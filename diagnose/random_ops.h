// The operators that draw random numbers, by name: the watch and the screen both ask
// (checkpoint-rng, nn/checkpoint.h).
#pragma once

#include <string_view>

namespace oomguard {

// "aten::bernoulli_", "aten::randn", ... Composites that may draw (dropout, feature_dropout, rrelu) are
// not listed: with p = 0 or in eval they draw nothing, and when they draw it is through one of these.
bool IsRandomOp(std::string_view name);

}  // namespace oomguard
