// Meta kernels LibTorch's C++ build lacks (Python supplies them through torch/_meta_registrations.py,
// which a C++ process never loads), so that scenario layers run on the meta backend.
//
//   oomguard::RegisterMetaKernels();  // once, before the first meta op; idempotent
//
// Each kernel computes the output's shape and dtype and makes the allocations the cpu kernel makes
// (Note [Meta kernels mirror the cpu kernels' allocations], meta_kernels.cpp); they go through the meta
// tracking allocator like any other meta tensor, so the bytes match the cpu backend's. The families
// beyond meta_kernels.cpp's own (norms, pooling, convolution, attention) are in meta_kernels_*.cpp.
#pragma once

namespace oomguard {

void RegisterMetaKernels();

}  // namespace oomguard
