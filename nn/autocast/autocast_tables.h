// The autocast policy tables meta mirrors, one per device, copied from the pinned torch: AutocastCPU's
// (autocast_table_cpu.cpp) and AutocastCUDA's (autocast_table_cuda.cpp). nn/autocast/meta_autocast.cpp casts by
// them; tests/autocast_test.cpp and tests/card_autocast_test.cpp compare each with the operators that
// have a kernel for its dispatch key in this process, so an upgrade that changes a list fails there.
#pragma once

#include <span>

namespace oomguard {

// What an autocast kernel does with an operator's floating-point tensor arguments: the CastPolicy of
// ATen/autocast_mode.h, plus the two CUDA registrations that are no policy of it.
enum class AutocastPolicy {
  kLowerPrecision,      // cast to the autocast dtype (lower_precision_fp)
  kFloat32,             // cast to float (fp32)
  kFloat32SetOptDtype,  // no cast; an unset `dtype` argument becomes float when the first argument is
                        // eligible (fp32_set_opt_dtype: softmax, log_softmax, sum, cumsum, prod, norms)
  kFloat32AppendDtype,  // redispatch to the overload with a dtype, float (fp32_append_dtype: norm)
  kPromote,             // cast to the widest floating type among the arguments (promote)
  kBanned,              // refused (binary_cross_entropy on CUDA: binary_cross_entropy_banned)
  kCudnnRnn,            // _cudnn_rnn's own wrapper (aten/src/ATen/cudnn/AutocastRNN.cpp): fp16 weights reflattened
};

// The rows' short names, for the tables' files.
namespace autocast_rows {
inline constexpr AutocastPolicy kLow = AutocastPolicy::kLowerPrecision;
inline constexpr AutocastPolicy kFp32 = AutocastPolicy::kFloat32;
inline constexpr AutocastPolicy kSetOptDtype = AutocastPolicy::kFloat32SetOptDtype;
inline constexpr AutocastPolicy kAppendDtype = AutocastPolicy::kFloat32AppendDtype;
inline constexpr AutocastPolicy kPromote = AutocastPolicy::kPromote;
}  // namespace autocast_rows

struct AutocastRow {
  const char* op;  // "name" or "name.overload", without "aten::"
  AutocastPolicy policy;
};

// AutocastCPU's registrations (aten/src/ATen/autocast_mode.cpp, TORCH_LIBRARY_IMPL(aten, AutocastCPU)).
std::span<const AutocastRow> AutocastCpuTable();

// AutocastCUDA's registrations: autocast_mode.cpp's TORCH_LIBRARY_IMPL(aten, Autocast) over the op lists
// of ATen/autocast_mode.h, and cudnn/AutocastRNN.cpp's _cudnn_rnn.
std::span<const AutocastRow> AutocastCudaTable();

}  // namespace oomguard
