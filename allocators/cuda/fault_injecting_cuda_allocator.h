// Fault injection on the cuda backend: a CUDAAllocator that forwards everything to PyTorch's own
// caching allocator, after asking the account's fault injector (fault_injection.h) about each request.
//
//   oomguard::InstallFaultInjectingCudaAllocator(oomguard::CudaAccount());  // before CUDA initialises
//   oomguard::ApplyCudaCap(cap_bytes, 0);                                   // initialises CUDA (cuda_cap.h)
//   {
//     oomguard::Limits limits = oomguard::LimitsForCap(cap_bytes);
//     limits.faults = std::make_shared<oomguard::FaultInjector>(std::move(policy));
//     oomguard::ScopedLimits scoped(oomguard::CudaAccount(), std::move(limits));
//     ... the request the policy picks throws c10::OutOfMemoryError ("CUDA out of memory (injected by oomguard: ...")
//   }
//
// The same policies as cpu and meta (Nth allocation, size, phase, probability with seed) count the same
// requests: every allocate, raw_alloc and raw_alloc_with_stream of at least one byte, with the ledger's
// current phase. A refused request never reaches the caching allocator, so its statistics (num_ooms
// included) and its trace, which feeds the ledger (Note [The cuda ledger], cuda_ledger.h), are those of
// the requests it actually served.
//
// Note [Why delegate rather than plug]: PyTorch's CUDAPluggableAllocator takes raw malloc/free
// functions and replaces the caching allocator altogether, so its statistics, memory fraction and
// trace trackers are gone (it throws "does not yet support getDeviceStats"). Delegating keeps the
// caching allocator doing all the work: DataPtrs carry its deleter, so frees go straight to it.
//
// Error policy: the refused request throws c10::OutOfMemoryError, recorded on the account as an
// injected refusal (DeviceAccount::CheckInjectedFault); installing after CUDA initialised is a
// programmer error (OOMGUARD_CHECK, which aborts). Everything else is the caching allocator's own behaviour.
// Everything here compiles, links and (with a fake inner allocator) runs without a GPU.
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>

#include <memory>

#include "allocators/device_account.h"

namespace oomguard {

// A delegating allocator around `inner`, asking `account` before each allocation. Owns neither: both
// must outlive it. Exposed for tests, which wrap a fake; the backend uses the install function.
std::unique_ptr<c10::cuda::CUDACachingAllocator::CUDAAllocator> MakeFaultInjectingCudaAllocator(
    c10::cuda::CUDACachingAllocator::CUDAAllocator* inner, DeviceAccount& account);

// Wraps the current CUDA allocator (CUDACachingAllocator::allocator, the native caching allocator
// unless PYTORCH_CUDA_ALLOC_CONF chose another) and makes the wrapper the one both
// CUDACachingAllocator::get() and c10::GetAllocator(kCUDA) return, for the rest of the process.
// Must run before CUDA initialises: tensors allocated earlier would carry the other allocator. Once
// per process; a second call with the same account does nothing, with another one is an error.
// Install it only when faults are wanted: without it the caching allocator is untouched.
void InstallFaultInjectingCudaAllocator(DeviceAccount& account);

}  // namespace oomguard
