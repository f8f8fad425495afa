// What `oomguard --version` reports: the tool, the LibTorch it runs on, CUDA, and the backends.
#pragma once

#include <string>
#include <vector>

namespace oomguard {

struct BackendInfo {
  std::string name;  // Name(Backend): "cpu", "meta", "cuda"
  bool compiled_in;
  std::string status;  // e.g. "ready", "compiled in; no GPU visible (driver: none)"
};

struct VersionInfo {
  std::string oomguard;        // "0.1.0"
  std::string libtorch;        // TORCH_VERSION of the headers compiled against, e.g. "2.11.0"
  std::string torch_wheel;     // the pinned wheel found at configure time, e.g. "2.11.0+cu130"
  std::string libtorch_cuda;   // CUDA version LibTorch was built with ("" for a cpu-only LibTorch)
  std::string cuda_runtime;    // "13.0" or "not compiled in"
  std::string cuda_driver;     // "none" without a driver
  std::string onednn_isa_cap;  // "AVX2" (Note [One oneDNN ISA on every machine]), a user's value, or ""
  std::vector<BackendInfo> backends;
};

VersionInfo CollectVersionInfo();
std::string FormatVersionInfo(const VersionInfo& info);

}  // namespace oomguard
