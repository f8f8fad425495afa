// How PyTorch 2.11's CUDA reductions (aten/src/ATen/native/cuda/Reduce.cuh: sum, mean, norm, var, ...)
// split their work, and so the global scratch a block-split reduction asks the caching allocator for:
//
//   const oomguard::ReduceLayout layout = oomguard::ReduceLayoutOf({65536, 64}, {64, 1}, 0, {true, false},
//                                                                   /*keepdim=*/false, 4, 4);
//   const oomguard::ReduceConfig c = oomguard::SetReduceConfig(layout, oomguard::ReduceKernel{4, 4, 4, 4},
//                                                              oomguard::ReferenceDeviceProps(75));
//   c.global_memory_size()  // 5,242,880 on a T4: grad.sum(0)'s staging buffer, freed when it returns
//
// Note [Reduce.cuh's global scratch]: gpu_reduce_kernel (Reduce.cuh lines 1180-1283 of torch 2.11's
// installed header) asks setReduceConfig (lines 1032-1177) how to launch; when the config splits each
// output's inputs across thread blocks (should_global_reduce: input_mult[CTA] != 0) it allocates, from
// the caching allocator, a staging buffer of global_memory_size() bytes (lines 193-202) and
// semaphore_size() bytes of semaphores (lines 204-209), both freed when the kernel has been launched.
// The split depends on the sizes, the input's strides, the accumulate type's size and the card's SM
// count and threads per SM, nothing else (the input pointer's alignment, for output vectorisation, is
// the storage offset's: the caching allocator's blocks are 512-byte aligned). This file is that
// arithmetic, ported line for line, over the layout TensorIterator gives a reduction (reordered and
// coalesced as TensorIteratorBase::reorder_dimensions and coalesce_dimensions do), which TensorIterator
// does not compute for meta tensors (build() skips coalescing on meta).
#pragma once

#include <cstdint>
#include <vector>

#include "allocators/cards.h"

namespace oomguard {

// A reduction's TensorIterator after reordering and coalescing: dimension 0 moves fastest, the reduced
// dimensions first. Strides in bytes.
struct ReduceLayout {
  std::vector<int64_t> shape;
  std::vector<int64_t> output_strides;
  std::vector<int64_t> input_strides;
  int64_t input_storage_offset = 0;  // elements: the input pointer's alignment (get_output_vec_size)

  int ndim() const { return static_cast<int>(shape.size()); }
  int num_reduce_dims() const;          // dimensions whose output stride is 0
  int64_t num_output_elements() const;  // TensorIteratorBase::num_output_elements
  int64_t numel() const;
  bool can_use_32bit_indexing() const;  // TensorIteratorBase::can_use_32bit_indexing
};

// The layout TensorIterator::reduce_op(viewed result, input) builds for an input of `sizes` and
// `strides` (elements) reducing the dimensions `reduced` marks (review_reduce_result's zero strides),
// the result contiguous.
ReduceLayout ReduceLayoutOf(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                            int64_t storage_offset, const std::vector<bool>& reduced, bool keepdim,
                            int64_t input_element_size, int64_t output_element_size);

// What the kernel instantiates gpu_reduce_kernel with: sizeof(arg_t) (the accumulator: float for a
// bf16/fp16 sum), sizeof(scalar_t) (the input), vt0, input_vec_size (the op's .cu file names them) and
// mnt_wrapper<scalar_t>::MAX_NUM_THREADS (256 for complex double, else 512).
struct ReduceKernel {
  int arg_size = 4;
  int scalar_size = 4;
  int vt0 = 4;
  int input_vec_size = 4;
  int max_num_threads = 512;
};

// Reduce.cuh's ReduceConfig, the fields setReduceConfig sets.
struct ReduceConfig {
  int element_size_bytes = 0;
  int num_inputs = 0;
  int num_outputs = 0;
  int step_input = 1;
  int step_output = 1;
  int ctas_per_output = 1;
  int input_mult[3] = {0, 0, 0};
  int output_mult[2] = {0, 0};
  int block_width = 0;
  int block_height = 0;
  int num_threads = 0;
  bool vectorize_input = false;
  int output_vec_size = 1;

  bool should_block_x_reduce() const { return input_mult[0] != 0; }
  bool should_global_reduce() const { return input_mult[2] != 0; }
  int grid_x() const;
  int values_per_thread() const;
  int64_t global_memory_size() const;  // the staging buffer's bytes (0 unless should_global_reduce)
  int semaphore_size() const;          // the semaphores' bytes (0 unless should_global_reduce)
};

// setReduceConfig<arg_t, scalar_t, vt0, input_vec_size>(iter) on a card of `device`.
ReduceConfig SetReduceConfig(const ReduceLayout& layout, const ReduceKernel& kernel, const CudaDeviceProps& device);

}  // namespace oomguard
