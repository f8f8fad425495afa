// A digest of a step's gradients: two variants whose gradients are equal to the bit have the same digest,
// which the `grads` check metric compares (checkpointing with and without the RNG state preserved).
//
//   m.grad_digest = GradDigest(grads, traits.has_data);  // "9f2c..." (16 hex digits), or ""
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace oomguard {

// FNV-1a over the bytes of every defined gradient, in order, copied to the host outside the ledger.
// Empty when a gradient exists on a backend without data (meta): there is nothing to hash, so grads
// checks cannot be evaluated there.
std::string GradDigest(const std::vector<at::Tensor>& grads, bool has_data);

}  // namespace oomguard
