#include "allocators/cuda/libtorch_cuda.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "base/check.h"

namespace oomguard {
namespace {

constexpr const char* kLibrary = "libtorch_cuda.so";

struct Loaded {
  void* handle = nullptr;
  std::string why;  // set when handle is null, or ATen kept its stub hooks
};

// The folder of the library that defines at::detail::getCUDAHooks: libtorch_cpu.so's, in the wheel.
std::string LibTorchFolder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&at::detail::getCUDAHooks), &info) == 0 || info.dli_fname == nullptr) return "";
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

Loaded Load() {
  Loaded loaded;
  // Linked in (a program linking all of LibTorch), or loaded by someone else.
  loaded.handle = dlopen(kLibrary, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  if (loaded.handle == nullptr) {
    const std::string folder = LibTorchFolder();
    const std::string path = folder.empty() ? kLibrary : folder + "/" + kLibrary;
    // Global: TorchScript and the dispatcher find its symbols and kernels as if it were linked in.
    loaded.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (loaded.handle == nullptr) {
      const char* error = dlerror();
      loaded.why = "LibTorch's CUDA library could not be loaded (" + std::string(error ? error : path) + ")";
      return loaded;
    }
  }
  if (!at::detail::getCUDAHooks().isBuilt()) {
    loaded.why =
        "LibTorch's CUDA library was loaded after the process had asked ATen for CUDA (at::manual_seed, "
        "at::hasCUDA, torch::cuda::*), which then keeps CUDA disabled: load it first "
        "(Note [LibTorch's CUDA library on demand], allocators/cuda/libtorch_cuda.h)";
  }
  return loaded;
}

const Loaded& Once() {
  static const Loaded loaded = Load();
  return loaded;
}

}  // namespace

bool LoadLibTorchCuda(std::string* why) {
  const Loaded& loaded = Once();
  if (loaded.why.empty()) return true;
  if (why != nullptr) *why = loaded.why;
  return false;
}

void* LibTorchCudaSymbol(const char* name) {
  const Loaded& loaded = Once();
  OOMGUARD_CHECK(loaded.handle != nullptr && loaded.why.empty()) << "LibTorchCudaSymbol before LoadLibTorchCuda";
  return dlsym(loaded.handle, name);
}

}  // namespace oomguard
