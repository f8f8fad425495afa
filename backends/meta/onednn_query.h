// What cpu's oneDNN (mkldnn) primitives would allocate, asked of the oneDNN that runs them, without
// running anything: for Meta kernels that mirror mkldnn convolutions
// (backends/meta/kernels/meta_kernels_conv_onednn.cpp).
//
//   if (oomguard::onednn::Available()) {
//     auto fwd = oomguard::onednn::Primitive::ConvForward(src, weights, bias, dst, {1, 1}, {0, 0}, {1, 1}, {1, 1});
//     int64_t scratch = fwd.Bytes(oomguard::onednn::Arg::kScratchpad);
//     bool reorder = fwd.Desc(oomguard::onednn::Arg::kSrc) != src;   // src: a plain strided desc
//   }
//
// Note [oneDNN on meta]: cpu float convolutions run oneDNN through ideep, which reorders inputs into
// the blocked layouts the chosen implementation wants (channels padded to the SIMD width) and hands it
// a scratchpad; all of it is allocated through c10's cpu allocator, so the cpu ledger books it. Which
// implementation is chosen, its layouts and its scratchpad depend on the CPU's ISA, the shapes and the
// thread count, so no formula reproduces them. oneDNN is linked statically into libtorch_cpu and its C
// API is not exported, but the functions are in the library's symbol table: this file finds them there
// (once, reading the ELF .symtab of the loaded libtorch_cpu) and creates the primitive descriptors cpu
// would create, which answer the sizes exactly on any machine. A libtorch without the symbol table
// (stripped) makes Available() false with the reason.
//
// Thread safety: Available() and everything else may be called from any thread after the first call.
#pragma once

#include <ATen/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace oomguard::onednn {

// Whether oneDNN's C API was found in libtorch_cpu; *why_not says why not.
bool Available(std::string* why_not = nullptr);

// A oneDNN memory descriptor (owned; cheap to copy).
class MemoryDesc {
 public:
  MemoryDesc() = default;
  static MemoryDesc Strided(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                            at::ScalarType dtype);
  static MemoryDesc Contiguous(const std::vector<int64_t>& dims, at::ScalarType dtype);    // abcd...
  static MemoryDesc Any(const std::vector<int64_t>& dims, at::ScalarType dtype);           // the primitive picks
  static MemoryDesc ChannelsLast(const std::vector<int64_t>& dims, at::ScalarType dtype);  // nwc/nhwc/ndhwc

  bool defined() const { return handle_ != nullptr; }
  int64_t bytes() const;  // 0 for an undefined desc
  // Plain: strided without inner blocks (abcd, acdb); blocked layouts like aBcd8b are not.
  bool plain() const;
  std::vector<int64_t> dims() const;
  std::vector<int64_t> strides() const;  // of a plain desc
  // The same memory with dims a and b swapped (ideep's desc::transpose): how ideep hands a
  // deconvolution PyTorch's [i, o, ...] weights as oneDNN's [o, i, ...] and back.
  MemoryDesc Transposed(int a, int b) const;
  bool operator==(const MemoryDesc& other) const;
  bool operator!=(const MemoryDesc& other) const { return !(*this == other); }

  const void* get() const { return handle_.get(); }  // the dnnl_memory_desc_t
  explicit MemoryDesc(std::shared_ptr<void> handle) : handle_(std::move(handle)) {}

 private:
  std::shared_ptr<void> handle_;
};

enum class Arg { kSrc, kWeights, kBias, kDst, kDiffSrc, kDiffWeights, kDiffBias, kDiffDst, kScratchpad };

// Which oneDNN primitive family: convolution, or deconvolution (cpu's transposed convolution). Both
// take the same descriptors; a backward primitive is of its forward hint's family.
enum class Op { kConvolution, kDeconvolution };

// A primitive descriptor as ideep creates it for cpu (user scratchpad, direct algorithm,
// forward_training). Throws c10::Error when oneDNN refuses the shapes.
class Primitive {
 public:
  // bias undefined: no bias. dilates are oneDNN's (PyTorch's dilation - 1).
  static Primitive ConvForward(const MemoryDesc& src, const MemoryDesc& weights, const MemoryDesc& bias,
                               const MemoryDesc& dst, const std::vector<int64_t>& strides,
                               const std::vector<int64_t>& dilates, const std::vector<int64_t>& padding_l,
                               const std::vector<int64_t>& padding_r, bool user_scratchpad = true,
                               Op op = Op::kConvolution);
  static Primitive ConvBackwardData(const MemoryDesc& diff_src, const MemoryDesc& weights, const MemoryDesc& diff_dst,
                                    const std::vector<int64_t>& strides, const std::vector<int64_t>& dilates,
                                    const std::vector<int64_t>& padding_l, const std::vector<int64_t>& padding_r,
                                    const Primitive& forward_hint);
  static Primitive ConvBackwardWeights(const MemoryDesc& src, const MemoryDesc& diff_weights,
                                       const MemoryDesc& diff_bias, const MemoryDesc& diff_dst,
                                       const std::vector<int64_t>& strides, const std::vector<int64_t>& dilates,
                                       const std::vector<int64_t>& padding_l, const std::vector<int64_t>& padding_r,
                                       const Primitive& forward_hint);
  // A reorder from one layout to another (ideep's reorder_to, user scratchpad).
  static Primitive Reorder(const MemoryDesc& from, const MemoryDesc& to);

  MemoryDesc Desc(Arg arg) const;
  int64_t Bytes(Arg arg) const { return Desc(arg).bytes(); }
  std::string implementation() const;  // "jit:avx2", "brgconv:avx512_core", ...

 private:
  Primitive(std::shared_ptr<void> handle, Op op) : handle_(std::move(handle)), op_(op) {}
  std::shared_ptr<void> handle_;  // the dnnl_primitive_desc_t
  Op op_ = Op::kConvolution;
};

}  // namespace oomguard::onednn
