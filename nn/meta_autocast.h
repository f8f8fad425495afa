// Autocast for meta tensors, which LibTorch's autocast skips: c10 has no AutocastMeta key, and
// AutocastCPU's kernels cast only cpu tensors (Note [Autocast on meta], meta_autocast.cpp).
//
//   {
//     oomguard::MetaAutocastScope autocast(at::kBFloat16);  // as at::autocast for cpu, on meta tensors
//     at::Tensor y = at::linear(x, w);                       // bf16, with w's bf16 copy cached
//   }                                                        // the cache is cleared at the outermost exit
//
// The casts follow AutocastCPU's policy table of the pinned torch op for op (lower precision, fp32,
// promote), with its weight cache, so that a meta run allocates what the cpu run does.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <optional>
#include <string>
#include <vector>

namespace oomguard {

// What AutocastCPU does with an operator's floating-point tensor arguments.
enum class AutocastPolicy { kLowerPrecision, kFloat32, kPromote };

// The policy of "name" or "name.overload" (no "aten::"); none: the op runs on its arguments as they are.
std::optional<AutocastPolicy> MetaAutocastPolicyOf(const std::string& op);

// Every operator the table names, "aten::name" or "aten::name.overload": what a test compares with
// the operators that have an AutocastCPU kernel.
std::vector<std::string> MetaAutocastOperators();

// Autocast on meta tensors for a scope, on this thread; nests. Registers its kernel on first use.
class MetaAutocastScope {
 public:
  explicit MetaAutocastScope(at::ScalarType dtype);
  ~MetaAutocastScope();
  MetaAutocastScope(const MetaAutocastScope&) = delete;
  MetaAutocastScope& operator=(const MetaAutocastScope&) = delete;

 private:
  c10::impl::LocalDispatchKeySet previous_keys_;
  std::optional<at::ScalarType> previous_dtype_;
};

// The dtype ops of the lower-precision policy cast to on this thread; none outside a scope.
std::optional<at::ScalarType> MetaAutocastDtype();

}  // namespace oomguard
