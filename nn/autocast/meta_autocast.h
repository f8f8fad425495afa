// Autocast for meta tensors, which LibTorch's autocast skips: c10 has no AutocastMeta key, and
// AutocastCPU's kernels cast only cpu tensors (Note [Autocast on meta], meta_autocast.cpp).
//
//   {
//     oomguard::MetaAutocastScope autocast(at::kBFloat16);  // as at::autocast for cpu, on meta tensors
//     at::Tensor y = at::linear(x, w);                       // bf16, with w's bf16 copy cached
//   }                                                        // the cache is cleared at the outermost exit
//
// The casts follow the policy table of the pinned torch op for op, with its weight cache: AutocastCPU's,
// so that a meta run allocates what the cpu run does, or with a card's kernels AutocastCUDA's
// (MetaAutocastScope(dtype, c10::kCUDA)), so that it allocates what the GPU run does.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <optional>
#include <string>
#include <vector>

#include "nn/autocast/autocast_tables.h"

namespace oomguard {

// The policy of "name" or "name.overload" (no "aten::") in the table of `mirrors` (c10::kCPU: AutocastCPU's,
// c10::kCUDA: AutocastCUDA's); none: the op runs on its arguments as they are.
std::optional<AutocastPolicy> MetaAutocastPolicyOf(c10::DeviceType mirrors, const std::string& op);

// Every operator the table of `mirrors` names, "aten::name" or "aten::name.overload": what a test
// compares with the operators that have a kernel for that device's autocast key.
std::vector<std::string> MetaAutocastOperators(c10::DeviceType mirrors);

// Autocast on meta tensors for a scope, on this thread, as `mirrors`' autocast casts (c10::kCPU or
// c10::kCUDA); nests (the innermost scope's table and dtype apply). Registers its kernel on first use.
class MetaAutocastScope {
 public:
  explicit MetaAutocastScope(at::ScalarType dtype, c10::DeviceType mirrors = c10::kCPU);
  ~MetaAutocastScope();
  MetaAutocastScope(const MetaAutocastScope&) = delete;
  MetaAutocastScope& operator=(const MetaAutocastScope&) = delete;

 private:
  c10::impl::LocalDispatchKeySet previous_keys_;
  std::optional<at::ScalarType> previous_dtype_;
  c10::DeviceType previous_mirrors_;
};

// The dtype ops of the lower-precision policy cast to on this thread; none outside a scope.
std::optional<at::ScalarType> MetaAutocastDtype();

// Whose autocast the innermost scope mirrors (c10::kCPU outside every scope).
c10::DeviceType MetaAutocastMirrors();

}  // namespace oomguard
