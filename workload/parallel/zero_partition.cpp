#include <ATen/ATen.h>

#include "base/check.h"
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
        const at::Tensor grad = s_.params[piece.param].grad();
        OOMGUARD_CHECK(grad.defined());
        grads.push_back(grad.reshape(-1).narrow(0, piece.begin, piece.length));
      }
    }
    const int64_t pad = s_.padding();
    if (pad > 0)
      grads.push_back(s_.spec.strategy == "zero2" ? s_.grad_shard.narrow(0, s_.shard - pad, pad) : s_.grad_padding);
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
