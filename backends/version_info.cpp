#include "backends/version_info.h"

#include <torch/headeronly/version.h>

#include "allocators/install.h"
#include "backends/backend.h"
#include "build_info.h"
#if OOMGUARD_WITH_CUDA
#include "allocators/cuda/cuda_cap.h"
#endif

namespace oomguard {

VersionInfo CollectVersionInfo() {
  VersionInfo info;
  info.oomguard = OOMGUARD_VERSION;
  info.libtorch = TORCH_VERSION;
  info.torch_wheel = OOMGUARD_TORCH_WHEEL;
  info.libtorch_cuda = OOMGUARD_TORCH_CUDA;
#if OOMGUARD_WITH_CUDA
  info.cuda_runtime = CudaRuntimeVersion();
  info.cuda_driver = CudaDriverVersion();
#else
  info.cuda_runtime = "not compiled in";
  info.cuda_driver = "unknown";
#endif
  info.onednn_isa_cap = OneDnnIsaCap();
  for (const BackendTraits& t : kBackendTraits) {
    const BackendDriver& driver = GetBackend(t.backend);
    info.backends.push_back({driver.name(), driver.compiled_in(), driver.Status()});
  }
  return info;
}

std::string FormatVersionInfo(const VersionInfo& info) {
  std::string out = "oomguard " + info.oomguard + "\n";
  out += "LibTorch " + info.libtorch + " (torch " + info.torch_wheel +
         (info.libtorch_cuda.empty() ? ", cpu-only build" : ", built with CUDA " + info.libtorch_cuda) + ")\n";
  out += "CUDA runtime " + info.cuda_runtime + ", driver " + info.cuda_driver + "\n";
  // Note [One oneDNN ISA on every machine] (allocators/install.h).
  if (info.onednn_isa_cap == "AVX2") {
    out += "oneDNN ISA capped at AVX2: cpu's bytes are the same on every x86-64 machine\n";
  } else {
    out += "oneDNN ISA " +
           (info.onednn_isa_cap.empty() ? std::string("not capped") : "capped at " + info.onednn_isa_cap) +
           ": cpu's bytes for bf16 and fp16 matmuls and for convolutions may differ from a machine's at AVX2, "
           "where the catalog's baselines are recorded\n";
  }
  out += "backends:\n";
  for (const BackendInfo& b : info.backends) out += "  " + b.name + ": " + b.status + "\n";
  return out;
}

}  // namespace oomguard
