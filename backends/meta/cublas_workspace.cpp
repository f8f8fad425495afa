#include "backends/meta/cublas_workspace.h"

#include <ATen/ATen.h>
#include <c10/util/env.h>

#include <algorithm>
#include <exception>
#include <regex>
#include <string>

#include "backends/meta/kernel_target.h"

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
//
// Decision: card mode does what the cuda backend does (Note [Library workspaces on cuda]): the
// workspaces are taken before the measurement starts, always (whether or not the workload multiplies,
// as WarmUpCudaLibraries takes both before any scenario), and outside the ledger. So the ledger's
// numbers (peaks, phase peaks, live bytes, forward_saved_bytes) are the scenario's own, equal to cpu
// kernels' but for the kernels' own differences, and the catalog's relations hold as on the cuda
// backend, whose ledger leaves them out too. They are not tensors: the measurement
// (workload/measurement_session.cpp) allocates them in its model of the caching allocator
// (CudaModelFeed::HoldFromStart) before the first tensor, where they round as on the GPU (8.125 MiB:
// a large block split from a 20 MiB segment; cuBLASLt's 1 MiB: a small block of a 2 MiB segment; 32
// MiB: a segment of its own) and stay, so they count in the model's reserved bytes, and so against the
// cap in the verdict on reserved bytes (Note [The verdict on reserved bytes]): a run whose ledger fits
// the cap but not with the workspaces beside it OOMs, as on the card. They are taken uncapped, as the
// cuda backend takes them before it sets its cap, so a cap below them fails the scenario's first
// request that needs a segment, where it is reported. The run's JSON reports them as
// cuda_model.allocated_at_start_bytes and reserved_at_start_bytes, like the cuda backend's
// cuda.allocated_at_start_bytes; the model's peaks include them, as PyTorch's do.
// (Before, the first matmul allocated them as meta tensors, in the ledger: they counted in every peak
// and in forward_saved_bytes, and 10 of the catalog's 19 scenarios failed their own relations.)

int64_t CudaBytesOfEnvConfig(const std::string& config, int64_t default_size) {
  const std::regex exp(":([0-9]+):([0-9]+)");
  std::sregex_iterator next(config.begin(), config.end(), exp), end;
  if (next == end) return default_size;
  int64_t total = 0;
  for (; next != end; ++next) total += std::stoll((*next)[1].str()) * 1024 * std::stoll((*next)[2].str());
  return total;
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

std::vector<int64_t> CublasWorkspacesHeldFromStart(const KernelTarget& target) {
  if (!target.cuda()) return {};
  static const bool unified = c10::utils::check_env("TORCH_CUBLASLT_UNIFIED_WORKSPACE") == true;
  std::vector<int64_t> sizes{CublasWorkspaceBytes(target.compute_capability)};
  if (!unified) sizes.push_back(CublasLtWorkspaceBytes(target.compute_capability));
  return sizes;
}

}  // namespace oomguard
