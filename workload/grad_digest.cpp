#include "workload/grad_digest.h"

#include <cstdint>
#include <cstdio>

#include "allocators/cpu_tracking_allocator.h"

namespace oomguard {

std::string GradDigest(const std::vector<at::Tensor>& grads, bool has_data) {
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a
  for (const at::Tensor& g : grads) {
    if (!g.defined()) continue;
    if (!has_data) return "";
    HostAllocationScope host;
    const at::Tensor c = g.contiguous().cpu();
    const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
    for (size_t i = 0; i < c.nbytes(); ++i) hash = (hash ^ bytes[i]) * 1099511628211ULL;
  }
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(hash));
  return buffer;
}

}  // namespace oomguard
