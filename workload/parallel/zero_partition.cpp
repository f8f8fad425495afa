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
    for (size_t i = 0; i < s_.pieces.size(); ++i) grads.push_back(s_.PieceGradient(i));
    const int64_t pad = s_.padding();
    if (pad > 0) grads.push_back(s_.grad_padding.defined() ? s_.grad_padding : at::zeros({pad}, s_.flat.options()));
    return grads;
  }
  void FreeGradientsInside() override {
    for (const DataParallel::State::Piece& piece : s_.pieces) s_.params[piece.param].mutable_grad().reset();
    s_.grads_in_partition.reset();
    s_.grad_padding.reset();
  }

 private:
  DataParallel::State& s_;
};

}  // namespace

std::unique_ptr<FlatPartition> MakeZeroPartition(DataParallel::State* s) { return std::make_unique<ZeroPartition>(s); }

}  // namespace oomguard
