#include "allocators/cuda/nccl_group.h"

#include <c10/cuda/CUDAStream.h>

#include <new>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <type_traits>

#include "allocators/cuda/libtorch_cuda.h"

namespace oomguard {
namespace {

using c10d::ProcessGroupNCCL;
using NcclOptions = ProcessGroupNCCL::Options;

// Note [ProcessGroupNCCL by name]: a constructor called as the Itanium ABI calls it, `this` first and
// each argument as the declaration passes it (a non-trivial intrusive_ptr by invisible reference, the
// caller destroying it after the call, as for any function).
using GroupConstructor = void (*)(void* self, c10::intrusive_ptr<c10d::Store>, int, int,
                                  c10::intrusive_ptr<NcclOptions>);
using OptionsConstructor = void (*)(void* self, bool is_high_priority_stream);
static_assert(std::is_constructible_v<ProcessGroupNCCL, c10::intrusive_ptr<c10d::Store>, int, int,
                                      c10::intrusive_ptr<NcclOptions>>);
static_assert(std::is_constructible_v<NcclOptions, bool>);
static_assert(alignof(ProcessGroupNCCL) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__ &&
              alignof(NcclOptions) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);

// More than any difference in NCCL_HAS_* members between the wheel's build and these headers.
constexpr size_t kRoomToSpare = 4096;

template <typename Fn>
Fn Constructor(const char* name) {
  void* symbol = LibTorchCudaSymbol(name);
  TORCH_CHECK(symbol != nullptr, "oomguard: libtorch_cuda.so has no ", name,
              " (Note [ProcessGroupNCCL by name], allocators/cuda/nccl_group.h)");
  return reinterpret_cast<Fn>(symbol);
}

// Memory for a T, constructed by `construct` in it; freed again should the constructor throw.
template <typename T, typename Construct>
T* ConstructedIn(Construct construct) {
  void* memory = ::operator new(sizeof(T) + kRoomToSpare);
  try {
    construct(memory);
  } catch (...) {
    ::operator delete(memory);
    throw;
  }
  return static_cast<T*>(memory);
}

}  // namespace

c10::intrusive_ptr<c10d::Backend> MakeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                                                std::chrono::milliseconds timeout) {
  const auto make_options = Constructor<OptionsConstructor>(kProcessGroupNcclOptionsConstructorSymbol);
  const auto make_group = Constructor<GroupConstructor>(kProcessGroupNcclConstructorSymbol);
  auto options = c10::intrusive_ptr<NcclOptions>::unsafe_steal_from_new(
      ConstructedIn<NcclOptions>([&](void* self) { make_options(self, /*is_high_priority_stream=*/false); }));
  options->timeout = timeout;
  auto* group = ConstructedIn<ProcessGroupNCCL>([&](void* self) { make_group(self, store, rank, world, options); });
  return c10::intrusive_ptr<c10d::Backend>::unsafe_steal_from_new(static_cast<c10d::Backend*>(group));
}

void SynchronizeCurrentCudaStream() { c10::cuda::getCurrentCUDAStream().synchronize(); }

}  // namespace oomguard
