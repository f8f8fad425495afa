// loop.loss "cross_entropy" on a model's output, whatever made it (a layer list, a TorchScript module):
// which axis holds the classes, the targets' shape, and the loss.
//
//   std::string error;
//   const std::optional<oomguard::ClassAxis> axis =
//       oomguard::ReadClassAxis(output.sizes(), /*token_ids=*/false, /*classes=*/5, &error);
//   if (!axis) throw oomguard::LossInputError(error);
//   at::Tensor target = at::randint(0, 5, axis->target_sizes, options.dtype(at::kLong));
//   at::Tensor loss = oomguard::CrossEntropy(output, target, *axis);
//
// Note [The class axis]: PyTorch's F.cross_entropy reads an output [N, C] or [N, C, d1, ...] with
// targets [N] or [N, d1, ...]: the classes are on dim 1, so a segmentation model's [N, C, H, W] with
// targets [N, H, W] needs no permute. One exception keeps language models as they are written: when
// the data (the model's first input) are int64 token ids, the output is read as logits [N, T, ..., V]
// with the classes on the last dim, and the loss flattens them to [N*T*..., V] with targets [N, T, ...]
// flattened, as a language model's training code does (F.cross_entropy(logits.view(-1, V),
// targets.view(-1))). For an output [N, C] both readings agree. data.classes must be the size of the
// class axis.
//
// Errors: an output that cannot be read so, or whose class axis is not data.classes long, is bad input:
// ReadClassAxis says why, and the loop throws LossInputError (the variant is UNRESOLVED).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace oomguard {

class LossInputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ClassAxis {
  int64_t dim = 1;                    // 1 (PyTorch's [N, C, ...]) or the last (token ids' logits)
  bool flatten = false;               // the classes are last: [N, ..., C] is read as [N*..., C]
  std::vector<int64_t> target_sizes;  // the output's sizes without the class axis
};

// The class axis of an output of `sizes` (Note [The class axis]); nullopt, with *error saying what was
// expected, when the output has fewer than 2 dims or its class axis is not `classes` long.
std::optional<ClassAxis> ReadClassAxis(at::IntArrayRef sizes, bool token_ids, int64_t classes, std::string* error);

// at::cross_entropy_loss of output against target (class ids shaped axis.target_sizes).
at::Tensor CrossEntropy(const at::Tensor& output, const at::Tensor& target, const ClassAxis& axis);

}  // namespace oomguard
