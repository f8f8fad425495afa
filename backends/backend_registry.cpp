// The backend registry: one driver per Backend, in enum order.
#include "backends/backend.h"

namespace oomguard {

// Each defined in backends/<name>_backend.cpp.
const BackendDriver& CpuBackendDriver();
const BackendDriver& MetaBackendDriver();
const BackendDriver& CudaBackendDriver();

const BackendDriver& GetBackend(Backend backend) {
  static const std::array<const BackendDriver*, kBackendTraits.size()> drivers = {
      &CpuBackendDriver(),
      &MetaBackendDriver(),
      &CudaBackendDriver(),
  };
  const BackendDriver& driver = *drivers[static_cast<size_t>(backend)];
  OOMGUARD_CHECK(driver.backend() == backend) << "backend registry out of enum order at " << Name(backend);
  return driver;
}

Backend ResolveBackend(const std::string& requested) {
  if (requested != "auto") return BackendNamed(requested);
  std::string ignored;
  return GetBackend(Backend::kCuda).Available(&ignored) ? Backend::kCuda : Backend::kCpu;
}

}  // namespace oomguard
