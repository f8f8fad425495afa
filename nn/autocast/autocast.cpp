#include "nn/autocast/autocast.h"

#include <ATen/autocast_mode.h>

#include "allocators/ledger.h"
#include "base/check.h"

namespace oomguard {

std::vector<AutocastSetting> CurrentAutocast() {
  std::vector<AutocastSetting> settings;
  for (const c10::DeviceType device : {c10::kCPU, c10::kCUDA}) {
    if (at::autocast::is_autocast_enabled(device))
      settings.push_back({device, at::autocast::get_autocast_dtype(device)});
  }
  if (const std::optional<at::ScalarType> meta = MetaAutocastDtype())
    settings.push_back({c10::kMeta, *meta, MetaAutocastMirrors()});
  return settings;
}

AutocastScope::AutocastScope(const AutocastSetting& setting) { Enter(setting); }

AutocastScope::AutocastScope(const std::vector<AutocastSetting>& settings) {
  for (const AutocastSetting& s : settings) Enter(s);
}

void AutocastScope::Enter(const AutocastSetting& setting) {
  OOMGUARD_CHECK(setting.dtype == at::kBFloat16 || setting.dtype == at::kHalf)
      << "autocast to " << setting.dtype << ": bf16 or fp16 only";
  if (setting.device == c10::kMeta) {
    meta_.push_back(std::make_unique<MetaAutocastScope>(setting.dtype, setting.mirrors));
    return;
  }
  OOMGUARD_CHECK(setting.device == c10::kCPU || setting.device == c10::kCUDA)
      << "autocast on " << setting.device << ": cpu, cuda or meta";
  previous_.push_back({setting.device, at::autocast::is_autocast_enabled(setting.device),
                       at::autocast::get_autocast_dtype(setting.device)});
  at::autocast::set_autocast_enabled(setting.device, true);
  at::autocast::set_autocast_dtype(setting.device, setting.dtype);
  at::autocast::increment_nesting();
}

// Note [Autocast cache frees]
// at::autocast::clear_cache() drops the cached casts of the weights (those autograd did not save are
// freed there) in the order of its hash map, keyed by TensorImpl addresses: an order that changes from
// run to run. The frees go into one timeline event (Ledger::ReleaseBatch), so that two runs of the same
// scenario give the same results file; MetaAutocastScope does the same with its cache.
AutocastScope::~AutocastScope() {
  for (auto it = previous_.rbegin(); it != previous_.rend(); ++it) {
    if (at::autocast::decrement_nesting() == 0) {
      Ledger::ReleaseBatch one_event;
      at::autocast::clear_cache();
    }
    at::autocast::set_autocast_enabled(it->device, it->enabled);
    at::autocast::set_autocast_dtype(it->device, it->dtype);
  }
  while (!meta_.empty()) meta_.pop_back();  // innermost first
}

}  // namespace oomguard
