// The meta backend: shapes only. LibTorch computes shapes and the meta tracking account books every
// byte; oomguard's Meta kernels fill LibTorch's gaps (backends/meta/kernels/meta_kernels.h).
#include "allocators/install.h"
#include "backends/backend.h"
#include "backends/meta/meta_gradient_sums.h"
#include "backends/meta/kernels/meta_kernels.h"

namespace oomguard {
namespace {

class MetaSession : public BackendSession {
 public:
  MetaSession() : BackendSession(Backend::kMeta, c10::Device(c10::kMeta), MetaAccount()) { RegisterMetaKernels(); }
 private:
  EngineSumWatch engine_sums_;  // Note [Gradient sums on meta]
};

class MetaDriver : public BackendDriver {
 public:
  Backend backend() const override { return Backend::kMeta; }
  bool Available(std::string*) const override { return true; }
  c10::Device device() const override { return c10::Device(c10::kMeta); }
  DeviceAccount& account() const override { return MetaAccount(); }
  std::unique_ptr<BackendSession> Open(const Limits&) const override { return std::make_unique<MetaSession>(); }
};

}  // namespace

const BackendDriver& MetaBackendDriver() {
  static const MetaDriver driver;
  return driver;
}

}  // namespace oomguard
