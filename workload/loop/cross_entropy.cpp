#include "workload/loop/cross_entropy.h"

namespace oomguard {
namespace {

std::string Shape(at::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

}  // namespace

std::optional<ClassAxis> ReadClassAxis(at::IntArrayRef sizes, bool token_ids, int64_t classes, std::string* error) {
  const int64_t dims = static_cast<int64_t>(sizes.size());
  if (dims < 2) {
    *error = "cross_entropy needs an output of [N, C] or [N, C, d1, ...] (PyTorch's F.cross_entropy); the output is " +
             Shape(sizes);
    return std::nullopt;
  }
  ClassAxis axis;
  axis.dim = token_ids ? dims - 1 : 1;
  axis.flatten = axis.dim == dims - 1;
  if (sizes[axis.dim] != classes) {
    const std::string how =
        token_ids ? "as a language model's logits [N, T, V] (the data are int64 token ids): the last dim"
                  : "as PyTorch's F.cross_entropy does, [N, C, d1, ...] with targets [N, d1, ...]: dim 1";
    *error = "cross_entropy reads the output " + Shape(sizes) + " " + how + " holds " +
             std::to_string(sizes[axis.dim]) + " classes, but data.classes is " + std::to_string(classes);
    return std::nullopt;
  }
  for (int64_t d = 0; d < dims; ++d) {
    if (d != axis.dim) axis.target_sizes.push_back(sizes[d]);
  }
  return axis;
}

at::Tensor CrossEntropy(const at::Tensor& output, const at::Tensor& target, const ClassAxis& axis) {
  if (!axis.flatten) return at::cross_entropy_loss(output, target);
  return at::cross_entropy_loss(output.reshape({-1, output.size(-1)}), target.reshape({-1}));
}

}  // namespace oomguard
