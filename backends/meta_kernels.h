// Meta kernels LibTorch's C++ build lacks (Python supplies them through torch/_meta_registrations.py,
// which a C++ process never loads), so that scenario layers run on the meta backend.
//
//   oomguard::RegisterMetaKernels();  // once, before the first meta op; idempotent
//
// Each kernel only computes the output's shape and dtype; allocation goes through the meta tracking
// allocator like any other meta tensor, so the bytes match the cpu backend's.
#pragma once

namespace oomguard {

void RegisterMetaKernels();

}  // namespace oomguard
