// A zero rank's flat partition (workload/parallel/flat_partition.h) over DataParallel's state: what
// DeepSpeed's stage 1 and 2 step reads and frees (Note [Master weights], workload/loop/master_weights.h).
#include <ATen/ATen.h>

#include "workload/parallel/data_parallel_state.h"

namespace oomguard {
namespace {

class ZeroPartition final : public FlatPartition {
 public:
  explicit ZeroPartition(DataParallel::State* s) : s_(*s) {}
  at::Tensor Slice() const override { return s_.flat.narrow(0, s_.owned_begin(), s_.shard); }
  void FreeGradientsOutside() override {
    for (size_t k = 0; k < s_.params.size(); ++k) {
      if (!s_.InSlice(k)) s_.params[k].mutable_grad().reset();
    }
  }
  std::vector<at::Tensor> Gradients() const override {
    std::vector<at::Tensor> grads;
    for (const DataParallel::State::Piece& piece : s_.pieces) {
      if (s_.spec.strategy == "zero2") {
        grads.push_back(
            s_.grad_shard.narrow(0, s_.offsets[piece.param] + piece.begin - s_.owned_begin(), piece.length));
      } else {
        // A parameter without a gradient reads as get_flat_partition's zeros_like (made here, at the step).
        const at::Tensor& param = s_.params[piece.param];
        const at::Tensor grad = param.grad().defined() ? param.grad() : at::zeros_like(param);
        grads.push_back(grad.reshape(-1).narrow(0, piece.begin, piece.length));
      }
    }
    const int64_t pad = s_.padding();
    if (pad > 0) {  // zero2: the shard's tail; zero1: the zeros AfterBackward made
      grads.push_back(s_.spec.strategy == "zero2" ? s_.grad_shard.narrow(0, s_.shard - pad, pad) : s_.grad_padding);
    }
    return grads;
  }
  void FreeGradientsInside() override {
    for (const DataParallel::State::Piece& piece : s_.pieces) s_.params[piece.param].mutable_grad().reset();
    s_.grad_padding.reset();
    s_.grad_shard.reset();
  }

 private:
  DataParallel::State& s_;
};

}  // namespace

std::unique_ptr<FlatPartition> MakeZeroPartition(DataParallel::State* s) { return std::make_unique<ZeroPartition>(s); }

}  // namespace oomguard
