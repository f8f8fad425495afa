// item() on a meta tensor, for a scope: 0, where outside the scope it throws as LibTorch's does.
//
//   {
//     oomguard::MetaItemScope unknown_values;
//     torch::nn::utils::clip_grad_norm_(params, 1.0);  // returns the norm through item(): 0 on meta
//   }
//
// For library code that reads a value the measurement does not depend on (clip_grad_norm_ returns the
// total norm, a GradScaler checks for infs): a meta tensor has no value, and everything else the code
// does (its allocations) runs as on cpu. Scopes nest, on this thread.
#pragma once

namespace oomguard {

class MetaItemScope {
 public:
  MetaItemScope();
  ~MetaItemScope();
  MetaItemScope(const MetaItemScope&) = delete;
  MetaItemScope& operator=(const MetaItemScope&) = delete;
};

}  // namespace oomguard
