#include "backends/meta/cuda_reduce_config.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

namespace oomguard {
namespace {

int64_t DivUp(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Reduce.cuh last_pow2: floor(log2(n)) as a power of two, at least 1.
int LastPow2(int n) {
  n |= (n >> 1);
  n |= (n >> 2);
  n |= (n >> 4);
  n |= (n >> 8);
  n |= (n >> 16);
  return std::max(1, n - (n >> 1));
}

// TensorIteratorBase::reorder_dimensions for the two operands of a reduction (output first): reduced
// dimensions to the front, then ascending strides, ties to the smaller size; an insertion sort from
// the reversed order, as the original.
std::vector<int> ReorderedDims(const std::vector<int64_t>& shape, const std::vector<int64_t>& out,
                               const std::vector<int64_t>& in) {
  const int ndim = static_cast<int>(shape.size());
  std::vector<int> perm(static_cast<size_t>(ndim));
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (ndim <= 1) return perm;
  const auto should_swap = [&](int dim0, int dim1) {
    for (int arg = 0; arg < 2; ++arg) {
      const std::vector<int64_t>& s = arg == 0 ? out : in;
      const int64_t stride0 = s[static_cast<size_t>(dim0)], stride1 = s[static_cast<size_t>(dim1)];
      if (arg == 0 && (stride0 == 0) != (stride1 == 0)) return stride1 == 0 ? 1 : -1;
      if (stride0 == 0 || stride1 == 0) continue;
      if (stride0 < stride1) return -1;
      if (stride0 > stride1) return 1;
      if (shape[static_cast<size_t>(dim0)] > shape[static_cast<size_t>(dim1)]) return 1;
    }
    return 0;
  };
  for (int i = 1; i < ndim; ++i) {
    int dim1 = i;
    for (int dim0 = i - 1; dim0 >= 0; --dim0) {
      const int comparison = should_swap(perm[static_cast<size_t>(dim0)], perm[static_cast<size_t>(dim1)]);
      if (comparison > 0) {
        std::swap(perm[static_cast<size_t>(dim0)], perm[static_cast<size_t>(dim1)]);
        dim1 = dim0;
      } else if (comparison < 0) {
        break;
      }
    }
  }
  return perm;
}

// TensorIteratorBase::coalesce_dimensions.
void Coalesce(ReduceLayout& l) {
  if (l.ndim() <= 1) return;
  const auto can_coalesce = [&](size_t d0, size_t d1) {
    if (l.shape[d0] == 1 || l.shape[d1] == 1) return true;
    return l.shape[d0] * l.output_strides[d0] == l.output_strides[d1] &&
           l.shape[d0] * l.input_strides[d0] == l.input_strides[d1];
  };
  const auto replace_stride = [&](size_t d0, size_t d1) {
    l.output_strides[d0] = l.output_strides[d1];
    l.input_strides[d0] = l.input_strides[d1];
  };
  size_t prev = 0;
  for (size_t dim = 1; dim < l.shape.size(); ++dim) {
    if (can_coalesce(prev, dim)) {
      if (l.shape[prev] == 1) replace_stride(prev, dim);
      l.shape[prev] *= l.shape[dim];
    } else {
      ++prev;
      if (prev != dim) {
        replace_stride(prev, dim);
        l.shape[prev] = l.shape[dim];
      }
    }
  }
  l.shape.resize(prev + 1);
  l.output_strides.resize(prev + 1);
  l.input_strides.resize(prev + 1);
}

// Reduce.cuh get_output_vec_size<scalar_t>: 4, halved until the input's address (in elements), the
// output dimension's size and every other input stride divide by it.
int OutputVecSize(const ReduceLayout& l, int scalar_size) {
  int vec = 4;
  const auto update = [&vec](uint64_t n) {
    while (n % static_cast<uint64_t>(vec) != 0) vec /= 2;
  };
  update(static_cast<uint64_t>(l.input_storage_offset));  // a 512-byte aligned block plus the offset
  const int output_index = l.num_reduce_dims();
  update(static_cast<uint64_t>(l.shape[static_cast<size_t>(output_index)]));
  for (int j = 0; j < l.ndim(); ++j) {
    if (j != output_index) update(static_cast<uint64_t>(l.input_strides[static_cast<size_t>(j)] / scalar_size));
  }
  return vec;
}

// ReduceConfig::set_block_dimension<scalar_t>.
void SetBlockDimension(ReduceConfig& c, int64_t dim0, int64_t dim1, int max_num_threads_of_type, int warp_size) {
  const int max_num_threads = max_num_threads_of_type / c.output_vec_size;
  const int dim0_pow2 = dim0 < max_num_threads ? LastPow2(static_cast<int>(dim0)) : max_num_threads;
  const int dim1_pow2 = dim1 < max_num_threads ? LastPow2(static_cast<int>(dim1)) : max_num_threads;
  c.block_width = std::min(dim0_pow2, warp_size);
  c.block_height = std::min(dim1_pow2, max_num_threads / c.block_width);
  c.block_width = std::min(dim0_pow2, max_num_threads / c.block_height);
  c.num_threads = c.block_width * c.block_height;
}

int SplitInput(ReduceConfig& c, int parallelism) {
  const int step = c.step_input;
  c.step_input *= parallelism;
  return step;
}
int SplitOutput(ReduceConfig& c, int parallelism) {
  const int step = c.step_output;
  c.step_output *= parallelism;
  return step;
}

}  // namespace

int ReduceLayout::num_reduce_dims() const {
  return static_cast<int>(std::count(output_strides.begin(), output_strides.end(), 0));
}

int64_t ReduceLayout::num_output_elements() const {
  int64_t elements = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (output_strides[d] != 0 || shape[d] == 0) elements *= shape[d];
  }
  return elements;
}

int64_t ReduceLayout::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

bool ReduceLayout::can_use_32bit_indexing() const {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (numel() > kMax) return false;
  for (const std::vector<int64_t>* strides : {&output_strides, &input_strides}) {
    int64_t max_offset = 1;
    for (size_t d = 0; d < shape.size(); ++d) max_offset += (shape[d] - 1) * (*strides)[d];
    if (max_offset > kMax) return false;
  }
  return true;
}

ReduceLayout ReduceLayoutOf(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                            int64_t storage_offset, const std::vector<bool>& reduced, bool keepdim,
                            int64_t input_element_size, int64_t output_element_size) {
  const size_t ndim = sizes.size();
  // The result is contiguous over its own shape (reduced dimensions 1 with keepdim, absent without);
  // review_reduce_result gives an absent dimension stride 0, and compute_strides zeroes a kept size-1
  // dimension that the input broadcasts over.
  std::vector<int64_t> out_strides(ndim, 0);
  int64_t next = output_element_size;
  for (size_t i = ndim; i-- > 0;) {
    if (reduced[i] && !keepdim) continue;
    const int64_t size = reduced[i] ? 1 : sizes[i];
    out_strides[i] = reduced[i] && sizes[i] != 1 ? 0 : next;
    next *= size;
  }
  std::vector<int64_t> in_strides(ndim);
  for (size_t i = 0; i < ndim; ++i) in_strides[i] = strides[i] * input_element_size;
  const std::vector<int> perm = ReorderedDims(sizes, out_strides, in_strides);
  ReduceLayout layout;
  layout.input_storage_offset = storage_offset;
  for (int p : perm) {
    layout.shape.push_back(sizes[static_cast<size_t>(p)]);
    layout.output_strides.push_back(out_strides[static_cast<size_t>(p)]);
    layout.input_strides.push_back(in_strides[static_cast<size_t>(p)]);
  }
  Coalesce(layout);
  return layout;
}

int ReduceConfig::grid_x() const { return static_cast<int>(DivUp(num_outputs / output_vec_size, step_output)); }

int ReduceConfig::values_per_thread() const { return static_cast<int>(DivUp(num_inputs, step_input)); }

int64_t ReduceConfig::global_memory_size() const {
  if (!should_global_reduce()) return 0;
  int64_t size = static_cast<int64_t>(element_size_bytes) * num_outputs * ctas_per_output;
  if (!should_block_x_reduce()) size *= static_cast<int64_t>(block_width) * output_vec_size;
  return size;
}

int ReduceConfig::semaphore_size() const {
  if (!should_global_reduce()) return 0;
  return static_cast<int>(sizeof(int)) * grid_x();
}

// setReduceConfig, line for line (Reduce.cuh lines 1032-1177); ROCm's branches left out.
ReduceConfig SetReduceConfig(const ReduceLayout& layout, const ReduceKernel& kernel, const CudaDeviceProps& device) {
  const int64_t num_outputs = layout.num_output_elements();
  const int64_t inputs_per_output = layout.numel() / num_outputs;
  ReduceConfig config;
  config.element_size_bytes = kernel.arg_size;
  config.num_outputs = static_cast<int>(num_outputs);
  config.num_inputs = static_cast<int>(inputs_per_output);

  int64_t dim0 = 1, dim1 = 1, fastest_moving_stride = kernel.scalar_size;
  bool reduction_on_fastest_striding_dimension = true;
  const int num_reduce_dims = layout.num_reduce_dims();
  if (layout.ndim() > 0) {
    const std::vector<int64_t>& in = layout.input_strides;
    reduction_on_fastest_striding_dimension =
        num_reduce_dims == layout.ndim() || in[0] < in[static_cast<size_t>(num_reduce_dims)];
    if (reduction_on_fastest_striding_dimension) {
      dim0 = inputs_per_output;
      dim1 = num_outputs;
      fastest_moving_stride = in[0];
    } else {
      dim0 = num_outputs;
      dim1 = inputs_per_output;
      fastest_moving_stride = in[static_cast<size_t>(num_reduce_dims)];
    }
  }
  if (fastest_moving_stride == kernel.scalar_size) {
    if (reduction_on_fastest_striding_dimension && dim0 >= 128 && num_reduce_dims == 1) {
      config.vectorize_input = true;  // "vectorize along input"
      dim0 /= kernel.input_vec_size;
    } else if (!reduction_on_fastest_striding_dimension) {
      config.output_vec_size = OutputVecSize(layout, kernel.scalar_size);  // "vectorize along output"
      dim0 /= config.output_vec_size;
    }
  }
  SetBlockDimension(config, dim0, dim1, kernel.max_num_threads, device.warp_size);
  const int block_width = config.block_width, block_height = config.block_height;
  if (layout.ndim() == 0 || reduction_on_fastest_striding_dimension) {
    config.input_mult[0] = SplitInput(config, block_width);
  } else {
    config.output_mult[0] = SplitOutput(config, block_width);
  }

  constexpr int kMinValuesPerThread = 16, kMaxValuesPerThread = 256;
  const int warp_split_threshold = std::min(block_height * 16, kMaxValuesPerThread);
  if (config.values_per_thread() >= warp_split_threshold) {
    config.input_mult[1] = SplitInput(config, block_height);
  } else {
    config.output_mult[1] = SplitOutput(config, block_height);
  }
  const int blocks_per_sm = device.max_threads_per_sm / config.num_threads;
  const int target_grid_size = device.sm_count * blocks_per_sm;
  const int grid = config.grid_x();
  if (config.input_mult[1] != 0 && config.values_per_thread() >= kMaxValuesPerThread && grid <= target_grid_size) {
    const int ctas_per_output1 = static_cast<int>(DivUp(target_grid_size, grid));
    const int ctas_per_output2 = static_cast<int>(DivUp(config.values_per_thread(), kMinValuesPerThread));
    const int ctas_per_output3 = static_cast<int>(DivUp(config.values_per_thread(), kMaxValuesPerThread));
    config.ctas_per_output = std::max(std::min(ctas_per_output1, ctas_per_output2), ctas_per_output3);
    if (config.ctas_per_output > 1) config.input_mult[2] = SplitInput(config, config.ctas_per_output);
  }
  return config;
}

}  // namespace oomguard
