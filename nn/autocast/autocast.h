// Autocast for a region of a training step, on the backend's device type: at::autocast for cpu and
// cuda (what torch.autocast(device_type) does: enable, set the dtype, nest, clear the weight cache at
// the outermost exit), MetaAutocastScope for meta (nn/autocast/meta_autocast.h), which mirrors the cpu's autocast
// or, with a card's kernels, CUDA's (`mirrors`, Note [AutocastCUDA on meta]).
//
//   {
//     oomguard::AutocastScope autocast({c10::kCPU, at::kBFloat16});
//     at::Tensor loss = model(x).mean();  // linear layers compute (and save) bf16
//   }
//   loss.backward();                     // outside autocast, as PyTorch recommends
//
// CurrentAutocast() is what a recomputation must replay (nn/checkpoint.h does, as PyTorch's checkpoint).
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <memory>
#include <optional>
#include <vector>

#include "nn/autocast/meta_autocast.h"

namespace oomguard {

struct AutocastSetting {
  c10::DeviceType device;
  at::ScalarType dtype;  // the lower-precision type: bf16 or fp16
  // On meta: whose autocast table it casts by, c10::kCPU (AutocastCPU's) or c10::kCUDA (AutocastCUDA's,
  // with a card's kernels); ignored elsewhere.
  c10::DeviceType mirrors = c10::kCPU;
};

// The autocast regions active on this thread (cpu, cuda, meta), innermost state only.
std::vector<AutocastSetting> CurrentAutocast();

class AutocastScope {
 public:
  explicit AutocastScope(const AutocastSetting& setting);
  // Every setting at once (what CurrentAutocast returned).
  explicit AutocastScope(const std::vector<AutocastSetting>& settings);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  struct Previous {
    c10::DeviceType device;
    bool enabled;
    at::ScalarType dtype;
  };
  void Enter(const AutocastSetting& setting);
  std::vector<Previous> previous_;                        // at::autocast devices, in entry order
  std::vector<std::unique_ptr<MetaAutocastScope>> meta_;  // meta
};

}  // namespace oomguard
