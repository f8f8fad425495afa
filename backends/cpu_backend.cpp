// The cpu backend: tensors on this host, booked by the cpu tracking account (allocators/install.h).
#include "allocators/install.h"
#include "backends/backend.h"

namespace oomguard {
namespace {

class CpuSession : public BackendSession {
 public:
  CpuSession() : BackendSession(Backend::kCpu, c10::Device(c10::kCPU), CpuAccount()) {}
};

class CpuDriver : public BackendDriver {
 public:
  Backend backend() const override { return Backend::kCpu; }
  bool Available(std::string*) const override { return true; }
  c10::Device device() const override { return c10::Device(c10::kCPU); }
  DeviceAccount& account() const override { return CpuAccount(); }
  std::unique_ptr<BackendSession> Open(const Limits&) const override { return std::make_unique<CpuSession>(); }
};

}  // namespace

const BackendDriver& CpuBackendDriver() {
  static const CpuDriver driver;
  return driver;
}

}  // namespace oomguard
