// Which kernel PyTorch 2.11's CUDA build runs for scaled_dot_product_attention on a card of a given
// compute capability, decided from shapes, strides, dtypes and flags alone (no device):
//
//   const at::SDPBackend b = oomguard::CudaSdpChoice({q, k, v, mask, dropout_p, is_causal, gqa}, 80);
//
// Note [The CUDA attention chooser on meta] (cuda_sdp_choice.cpp) names the source of each rule.
#pragma once

#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>

namespace oomguard {

// PyTorch's sdp::select_sdp_backend (cuda/sdp_utils.cpp) for a card of `compute_capability` (major *
// 10 + minor) with the cuDNN the torch 2.11 cu130 wheel pins (9.19.0). Returns at::SDPBackend::error
// where the user disabled every backend that fits, as PyTorch does.
at::SDPBackend CudaSdpChoice(const sdp::sdp_params& params, int compute_capability);

// The backend order select_sdp_backend tries on that card (cuDNN first on sm_90 and sm_10x).
std::array<at::SDPBackend, at::num_sdp_backends> CudaSdpPriorityOrder(int compute_capability);

}  // namespace oomguard
