// c10d's ProcessGroupNCCL, made in a process that loaded LibTorch's CUDA library on demand (Note
// [LibTorch's CUDA library on demand], libtorch_cuda.h): the group real ranks on cuda join (Note [Real
// ranks on cuda], workload/parallel/rank_group.h, which is the one place that asks for it).
//
//   std::string why;
//   if (!oomguard::LoadLibTorchCuda(&why)) { ... }
//   c10::intrusive_ptr<c10d::Backend> nccl = oomguard::MakeNcclGroup(store, rank, world, timeout);
//   nccl->allreduce(tensors_on_cuda_rank)->wait();
//
// Note [ProcessGroupNCCL by name]
// ProcessGroupNCCL lives in libtorch_cuda.so, which the tool does not link (the CTest
// LibTorchCudaOnDemand.TheToolDoesNotLinkIt). Its header compiles against the wheel's (with nccl.h from
// the wheel's nvidia/nccl/include, USE_C10D_NCCL defined as torch's CMake targets define it), and every
// call after construction goes through its vtable, which the library fills; only its two constructors
// (ProcessGroupNCCL's and its Options') are named here and looked up in the loaded library, as
// cuda_history.cpp looks up _record_memory_history. Each is called on memory allocated here, with room
// to spare (kRoomToSpare) should the wheel's NCCL headers and the build's differ in a member, and the
// object is handed to an intrusive_ptr as make_intrusive would (refcount 0 to 1); it is destroyed
// through its virtual destructor, in the library. Nothing here reimplements a collective: the group is
// NCCL's, whole.
//
// Error policy: a library without either symbol (another torch than the pinned one) throws c10::Error;
// NCCL's own failures (no GPU, a peer that never comes) are c10::Errors thrown by the group.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <chrono>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace oomguard {

// Rank `rank` of `world` over `store` (each rank's store must reach the same keys), with `timeout` for
// its collectives' watchdog. The CUDA library must be loaded (LoadLibTorchCuda). Makes no NCCL
// communicator yet: NCCL makes one on the first collective, on the device of its tensors.
c10::intrusive_ptr<c10d::Backend> MakeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                                                std::chrono::milliseconds timeout);

// Blocks the host until the current device's current stream has run everything queued on it (a
// collective waited for on it: Note [NCCL collectives complete on the host],
// workload/parallel/rank_group.cpp).
void SynchronizeCurrentCudaStream();

// The constructors MakeNcclGroup calls, by their names in libtorch_cuda.so (Note [ProcessGroupNCCL by
// name]): ProcessGroupNCCL(intrusive_ptr<Store>, int, int, intrusive_ptr<Options>) and Options(bool).
inline constexpr const char* kProcessGroupNcclConstructorSymbol =
    "_ZN4c10d16ProcessGroupNCCLC1EN3c1013intrusive_ptrINS_5StoreENS1_6detail34intrusive_target_default_null_"
    "typeIS3_EEEEiiNS2_INS0_7OptionsENS5_IS8_EEEE";
inline constexpr const char* kProcessGroupNcclOptionsConstructorSymbol = "_ZN4c10d16ProcessGroupNCCL7OptionsC1Eb";

}  // namespace oomguard
