// LibTorch's CUDA library loaded on demand (Note [LibTorch's CUDA library on demand],
// allocators/cuda/libtorch_cuda.h), in a program linked as the tool is (OOMGUARD_LIBTORCH_CUDA_ON_DEMAND):
// not there at start-up, then loaded with its kernels, hooks and the symbols oomguard looks up. Needs no
// GPU. Each test expects a process of its own, as CTest runs them: the load cannot be undone.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "allocators/cuda/cuda_history.h"
#include "allocators/cuda/libtorch_cuda.h"

namespace oomguard {
namespace {

bool Loaded() { return dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD) != nullptr; }

bool EmptyHasACudaKernel() {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow("aten::empty", "memory_format")
      .hasKernelForDispatchKey(c10::DispatchKey::CUDA);
}

TEST(LibTorchCudaOnDemand, LoadsWithItsKernelsItsHooksAndTheSymbolsOomguardCalls) {
  ASSERT_FALSE(Loaded()) << "linked in: this program should link as the tool does";
  EXPECT_FALSE(EmptyHasACudaKernel());

  std::string why;
  ASSERT_TRUE(LoadLibTorchCuda(&why)) << why;
  EXPECT_EQ(why, "");
  EXPECT_TRUE(Loaded());
  EXPECT_TRUE(EmptyHasACudaKernel());
  EXPECT_TRUE(at::detail::getCUDAHooks().isBuilt());
  EXPECT_NE(LibTorchCudaSymbol(kRecordMemoryHistorySymbol), nullptr);
  EXPECT_NE(LibTorchCudaSymbol(kMemorySnapshotPickledSymbol), nullptr);
  EXPECT_EQ(LibTorchCudaSymbol("oomguard_no_such_symbol"), nullptr);
  EXPECT_TRUE(LoadLibTorchCuda(&why));  // once: the second call finds it done
}

TEST(LibTorchCudaOnDemand, AProcessThatAskedAtenForCudaFirstIsToldWhyItCannotHaveIt) {
  ASSERT_FALSE(Loaded()) << "linked in: this program should link as the tool does";
  EXPECT_FALSE(at::detail::getCUDAHooks().isBuilt());  // ATen keeps this stub from now on

  std::string why;
  EXPECT_FALSE(LoadLibTorchCuda(&why));
  EXPECT_NE(why.find("loaded after the process had asked ATen for CUDA"), std::string::npos) << why;
  EXPECT_NE(why.find("Note [LibTorch's CUDA library on demand]"), std::string::npos) << why;
  EXPECT_TRUE(Loaded());  // the file itself loaded
}

}  // namespace
}  // namespace oomguard
