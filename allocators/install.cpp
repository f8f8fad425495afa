#include "allocators/install.h"

#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <mutex>

#include "allocators/cpu_tracking_allocator.h"
#include "allocators/meta_tracking_allocator.h"

namespace oomguard {
namespace {

constexpr uint8_t kPriority = 100;

// Never destroyed: c10 keeps raw pointers to the allocators until the process exits, and tensors
// freed during static destruction still reach them.
CpuTrackingAllocator& CpuAllocator() {
  static auto* allocator = new CpuTrackingAllocator(CpuAccount());
  return *allocator;
}
MetaTrackingAllocator& MetaAllocator() {
  static auto* allocator = new MetaTrackingAllocator(MetaAccount());
  return *allocator;
}

}  // namespace

DeviceAccount& CpuAccount() {
  static auto* account = new DeviceAccount("cpu");
  return *account;
}

DeviceAccount& MetaAccount() {
  static auto* account = new DeviceAccount("meta");
  return *account;
}

void CapOneDnnIsa() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr && std::getenv("DNNL_MAX_CPU_ISA") == nullptr) {
      setenv("ONEDNN_MAX_CPU_ISA", "AVX2", /*overwrite=*/0);
    }
  });
}

std::string OneDnnIsaCap() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    if (const char* value = std::getenv(name)) return value;
  }
  return "";  // not capped: CapOneDnnIsa was not called
}

void InstallTrackingAllocators() {
  CapOneDnnIsa();
  static std::once_flag once;
  std::call_once(once, [] {
    c10::SetCPUAllocator(&CpuAllocator(), kPriority);
    c10::SetAllocator(c10::DeviceType::Meta, &MetaAllocator(), kPriority);
  });
}

bool TrackingAllocatorsInstalled() {
  return c10::GetCPUAllocator() == &CpuAllocator() && c10::GetAllocator(c10::DeviceType::Meta) == &MetaAllocator();
}

}  // namespace oomguard
