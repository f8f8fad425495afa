// LibTorch's CUDA library loaded on demand (Note [LibTorch's CUDA library on demand],
// allocators/cuda/libtorch_cuda.h), in a program linked as the tool is (OOMGUARD_LIBTORCH_CUDA_ON_DEMAND):
// not there at start-up, then loaded with its kernels, hooks and the symbols oomguard looks up. Needs no
// GPU. The load cannot be undone, so each test runs its checks in a fresh process of its own (a
// "threadsafe" death test re-executes this binary for that one test): the binary passes when run whole.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "allocators/cuda/cuda_history.h"
#include "allocators/cuda/libtorch_cuda.h"
#include "allocators/cuda/nccl_group.h"

namespace oomguard {
namespace {

bool Loaded() { return dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD) != nullptr; }

bool EmptyHasACudaKernel() {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow("aten::empty", "memory_format")
      .hasKernelForDispatchKey(c10::DispatchKey::CUDA);
}

// What a fresh process's checks found wrong, one line each; empty when all held.
class Findings {
 public:
  void Expect(bool held, const std::string& what) {
    if (!held) text_ += what + "\n";
  }
  // Ends the fresh process: code 0 when every check held, else 1 with the findings on stderr.
  [[noreturn]] void Exit() const {
    std::fputs(text_.c_str(), stderr);
    std::fflush(stderr);
    std::_Exit(text_.empty() ? 0 : 1);
  }

 private:
  std::string text_;
};

[[noreturn]] void LoadInAFreshProcess() {
  Findings findings;
  findings.Expect(!Loaded(), "loaded at start-up: this program should link as the tool does");
  findings.Expect(!EmptyHasACudaKernel(), "aten::empty has a CUDA kernel before the load");
  std::string why;
  findings.Expect(LoadLibTorchCuda(&why), "the load failed: " + why);
  findings.Expect(why.empty(), "the load explained itself: " + why);
  findings.Expect(Loaded(), "libtorch_cuda.so not loaded after the load");
  findings.Expect(EmptyHasACudaKernel(), "aten::empty has no CUDA kernel after the load");
  findings.Expect(at::detail::getCUDAHooks().isBuilt(), "ATen's CUDA hooks are the stub after the load");
  findings.Expect(LibTorchCudaSymbol(kRecordMemoryHistorySymbol) != nullptr, "no _record_memory_history");
  findings.Expect(LibTorchCudaSymbol(kMemorySnapshotPickledSymbol) != nullptr, "no _memory_snapshot_pickled");
  findings.Expect(LibTorchCudaSymbol(kProcessGroupNcclConstructorSymbol) != nullptr, "no ProcessGroupNCCL constructor");
  findings.Expect(LibTorchCudaSymbol(kProcessGroupNcclOptionsConstructorSymbol) != nullptr,
                  "no ProcessGroupNCCL::Options constructor");
  findings.Expect(LibTorchCudaSymbol("oomguard_no_such_symbol") == nullptr, "a symbol that does not exist");
  findings.Expect(LoadLibTorchCuda(&why), "a second load failed: " + why);  // once: it finds it done
  findings.Exit();
}

[[noreturn]] void LoadAfterAskingAtenInAFreshProcess() {
  Findings findings;
  findings.Expect(!Loaded(), "loaded at start-up: this program should link as the tool does");
  findings.Expect(!at::detail::getCUDAHooks().isBuilt(), "built hooks before the load");  // kept from now on
  std::string why;
  findings.Expect(!LoadLibTorchCuda(&why), "the load succeeded after ATen had cached its stub hooks");
  findings.Expect(why.find("loaded after the process had asked ATen for CUDA") != std::string::npos,
                  "the reason does not say what happened: " + why);
  findings.Expect(why.find("Note [LibTorch's CUDA library on demand]") != std::string::npos,
                  "the reason does not name the note: " + why);
  findings.Expect(Loaded(), "the file itself did not load");
  findings.Exit();
}

TEST(LibTorchCudaOnDemand, LoadsWithItsKernelsItsHooksAndTheSymbolsOomguardCalls) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(LoadInAFreshProcess(), testing::ExitedWithCode(0), "^$");
}

TEST(LibTorchCudaOnDemand, AProcessThatAskedAtenForCudaFirstIsToldWhyItCannotHaveIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(LoadAfterAskingAtenInAFreshProcess(), testing::ExitedWithCode(0), "^$");
}

}  // namespace
}  // namespace oomguard
