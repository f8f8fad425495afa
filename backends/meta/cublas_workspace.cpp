#include "backends/meta/cublas_workspace.h"

#include <ATen/ATen.h>
#include <ATen/ops/addmm_meta_dispatch.h>
#include <ATen/ops/addmv_meta_dispatch.h>
#include <ATen/ops/baddbmm_meta_dispatch.h>
#include <ATen/ops/bmm_meta_dispatch.h>
#include <ATen/ops/mm_meta_dispatch.h>
#include <c10/util/env.h>

#include <algorithm>
#include <exception>
#include <regex>
#include <string>

#include "backends/meta/kernel_target.h"
#include "backends/meta/meta_kernels_internal.h"

namespace oomguard {
namespace {

// Note [cuBLAS workspaces held from the start]
// PyTorch 2.11 gives cuBLAS a workspace of its own allocator's memory (aten/src/ATen/cuda/
// CublasHandlePool.cpp): getCurrentCUDABlasHandle calls setWorkspaceForHandle, which allocates
// getChosenWorkspaceSize() bytes through the CUDA caching allocator the first time a (handle, stream)
// pair is seen and keeps them in cublas_handle_stream_to_workspace() until the process ends (only
// torch._C._cuda_clearCublasWorkspaces frees them). cuBLASLt calls (addmm with a bias vector:
// gemm_and_bias) take the same cuBLAS handle, so the cuBLAS workspace first, then getCUDABlasLtWorkspace
// allocates a second, cuBLASLt workspace of getCUDABlasLtWorkspaceSize() bytes, kept alike, unless
// TORCH_CUBLASLT_UNIFIED_WORKSPACE=1 makes it reuse the cuBLAS one (its size is capped at the cuBLAS
// size either way). So a training process on a card holds 8.125 MiB (32 MiB on sm_90) + 1 MiB from
// its first matmul on, through every later peak: memory no tensor owns that a card's budget must keep.
// On meta with a card's kernels, the first mm/addmm/bmm/baddbmm/addmv allocates them as meta tensors
// held here, so they appear in peaks and live bytes from that op on. The meta backend frees them when
// a measurement begins (backends/meta_backend.cpp), so each measurement shows them from its own first
// matmul, as a fresh process would; they are also freed when the kernel target changes (checked at the
// next matmul) and by ReleaseCublasWorkspaces().
struct Held {
  at::Tensor cublas;
  at::Tensor cublaslt;
  KernelTarget target;
};
Held& held() {
  static Held* h = new Held();  // never destroyed: a meta tensor must not outlive the meta allocator
  return *h;
}

int64_t CudaBytesOfEnvConfig(const std::string& config, int64_t default_size) {
  const std::regex exp(":([0-9]+):([0-9]+)");
  std::sregex_iterator next(config.begin(), config.end(), exp), end;
  if (next == end) return default_size;
  int64_t total = 0;
  for (; next != end; ++next) total += std::stoll((*next)[1].str()) * 1024 * std::stoll((*next)[2].str());
  return total;
}

// Frees what a different target made; true when the current target is a card.
bool SyncTarget() {
  const KernelTarget& target = CurrentKernelTarget();
  if (held().target != target) ReleaseCublasWorkspaces();
  held().target = target;
  return target.cuda();
}

at::Tensor Workspace(int64_t bytes) {
  return at::empty({bytes}, at::TensorOptions().device(at::kMeta).dtype(at::kByte));
}

// The Meta kernels of the cuBLAS ops: LibTorch's own (at::meta::*), after which a card's first call
// makes the workspaces. On cpu targets they are LibTorch's kernels unchanged.
at::Tensor MmMeta(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor out = at::meta::mm(self, mat2);
  EnsureCublasWorkspace();
  return out;
}
at::Tensor BmmMeta(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor out = at::meta::bmm(self, mat2);
  EnsureCublasWorkspace();
  return out;
}
at::Tensor BaddbmmMeta(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                       const at::Scalar& alpha) {
  at::Tensor out = at::meta::baddbmm(self, b1, b2, beta, alpha);
  EnsureCublasWorkspace();
  return out;
}
at::Tensor AddmvMeta(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                     const at::Scalar& alpha) {
  at::Tensor out = at::meta::addmv(self, mat, vec, beta, alpha);
  EnsureCublasWorkspace();
  return out;
}
// addmm_out_cuda_impl's useLtInterface (Blas.cpp): a bias vector as long as the output's rows, beta 1,
// both matrices larger than 1 x 1 in each dimension, a floating dtype: cublasLt's gemm_and_bias.
at::Tensor AddmmMeta(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                     const at::Scalar& alpha) {
  at::Tensor out = at::meta::addmm(self, mat1, mat2, beta, alpha);
  const at::ScalarType t = mat1.scalar_type();
  const bool lt = self.dim() == 1 && mat1.dim() == 2 && mat2.dim() == 2 && beta.toComplexDouble() == 1.0 &&
                  self.size(0) == mat2.size(1) && self.is_contiguous() && mat1.size(0) > 1 && mat1.size(1) > 1 &&
                  mat2.size(0) > 1 && mat2.size(1) > 1 && mat1.size(0) < 65535 * 32 && mat1.size(1) < 65535 * 32 &&
                  mat2.size(1) < 65535 * 32 &&
                  (t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16);
  if (lt) {
    EnsureCublasLtWorkspace();
  } else {
    EnsureCublasWorkspace();
  }
  return out;
}

}  // namespace

int64_t CublasWorkspaceBytes(int compute_capability) {
  const bool sm90 = compute_capability == 90;
  const int64_t default_size = sm90 ? 4096 * 8 * 1024 : 4096 * 1024 * 2 + 16 * 1024 * 8;
  const auto config = c10::utils::get_env("CUBLAS_WORKSPACE_CONFIG");
  return config ? CudaBytesOfEnvConfig(*config, default_size) : default_size;
}

int64_t CublasLtWorkspaceBytes(int compute_capability) {
  int64_t kib = 1024;  // "default size in KiB according to #73328"
  if (const auto size = c10::utils::get_env("CUBLASLT_WORKSPACE_SIZE")) {
    try {
      kib = std::stoi(*size);
    } catch (const std::exception&) {
    }
  }
  return std::min(kib * 1024, CublasWorkspaceBytes(compute_capability));
}

void EnsureCublasWorkspace() {
  if (!SyncTarget() || held().cublas.defined()) return;
  held().cublas = Workspace(CublasWorkspaceBytes(held().target.compute_capability));
}

void EnsureCublasLtWorkspace() {
  if (!SyncTarget()) return;
  EnsureCublasWorkspace();
  static const bool unified = c10::utils::check_env("TORCH_CUBLASLT_UNIFIED_WORKSPACE") == true;
  if (unified || held().cublaslt.defined()) return;
  held().cublaslt = Workspace(CublasLtWorkspaceBytes(held().target.compute_capability));
}

void ReleaseCublasWorkspaces() {
  held().cublaslt.reset();
  held().cublas.reset();
}

int64_t HeldCublasWorkspaceBytes() {
  int64_t bytes = 0;
  if (held().cublas.defined()) bytes += held().cublas.nbytes();
  if (held().cublaslt.defined()) bytes += held().cublaslt.nbytes();
  return bytes;
}

namespace meta_kernels {
void RegisterCublasWorkspace(torch::Library& meta) {
  meta.impl("mm", TORCH_FN(MmMeta));
  meta.impl("addmm", TORCH_FN(AddmmMeta));
  meta.impl("bmm", TORCH_FN(BmmMeta));
  meta.impl("baddbmm", TORCH_FN(BaddbmmMeta));
  meta.impl("addmv", TORCH_FN(AddmvMeta));
}
}  // namespace meta_kernels

}  // namespace oomguard
