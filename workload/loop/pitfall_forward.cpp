#include "workload/loop/pitfall_forward.h"

#include <memory>

#include "model/phase.h"
#include "nn/checkpoint.h"

namespace oomguard {

at::Tensor PitfallForward::Forward(const Batch& batch, bool training, std::vector<at::Tensor>* intermediates) {
  const at::Tensor& input = batch.input;
  if (!batch.more.empty()) {  // several inputs: the whole forward (the loader refused segment knobs)
    std::vector<at::Tensor> inputs = {input};
    inputs.insert(inputs.end(), batch.more.begin(), batch.more.end());
    return net_.ForwardInputs(inputs, training);
  }
  const PitfallSpec& p = spec_.pitfalls;
  const size_t n = net_.segments();
  layer_bytes_.clear();
  if (training && p.inplace.target == "parameter") {
    const size_t layer = static_cast<size_t>(p.inplace.layer);
    at::Tensor w = net_.segment_parameters(layer, layer + 1).at(0);
    w.mul_(1.0);  // an in-place edit of a leaf that requires grad, outside no_grad
  }
  // Note [The segment hook outlives the forward]: a checkpointed segment runs again in backward, after
  // this function returned, so the hook holds copies and shared state, never references to locals.
  // The recomputation repeats the knobs, as a user's checkpointed function repeats its own code, but
  // keeps nothing in `intermediates`: that list is the iteration's, and a graph kept past it (retain_graph
  // with an accumulated loss) may recompute in a later one. The layer bytes are the forward's alone.
  const auto live_before_layer = std::make_shared<int64_t>(ledger_.live_bytes());
  const AfterSegment after = [this, training, n, intermediates, live_before_layer](size_t i, at::Tensor out) {
    const PitfallSpec& p = spec_.pitfalls;
    const bool recomputing = ledger_.phase() == Name(Phase::kBackward);
    if (training && p.inplace.target == "output" && static_cast<int64_t>(i) == p.inplace.layer) {
      out = ApplyInplaceKnob(out);
    }
    if (training && i + 1 < n && (p.retain_grad || p.keep_intermediates)) {
      if (p.retain_grad) out.retain_grad();
      if (!recomputing) intermediates->push_back(out);
    }
    if (recomputing) return out;
    const int64_t live = ledger_.live_bytes();
    layer_bytes_.emplace_back(net_.segment_name(i), live - *live_before_layer);
    *live_before_layer = live;
    return out;
  };
  if (n == 0 || !training || p.checkpoint.segments == 0) {
    at::Tensor x = input.is_cpu() && spec_.data.on_host && p.transfer == "inside" ? batches_.ToDevice(input) : input;
    if (n == 0) return net_.Forward(x, training);
    if (!parallel_) return net_.ForwardSegments(x, 0, n, training, after);
    const AfterSegment rank = [this, &after, n](size_t i, at::Tensor out) {  // fsdp gathers and frees units
      out = after(i, parallel_->AfterSegment(i, std::move(out)));
      return i + 1 < n ? parallel_->BeforeSegment(i + 1, std::move(out)) : out;
    };
    return parallel_->AfterForward(net_.ForwardSegments(parallel_->BeforeForward(x), 0, n, training, rank));
  }
  const size_t segments = static_cast<size_t>(p.checkpoint.segments);
  // Note [Checkpointing an FSDP2 unit], workload/parallel/fully_sharded.h: the rank's hooks go around each
  // checkpointed segment, never inside it, so the recomputation runs none of them.
  at::Tensor x = parallel_ ? parallel_->BeforeForward(input) : input;
  size_t begin = 0;
  for (size_t s = 0; s < segments; ++s) {
    const size_t end = begin + n / segments + (s < n % segments ? 1 : 0);
    const bool transfer_inside = s == 0 && p.transfer == "inside" && spec_.data.on_host;
    const Segment segment = [this, begin, end, transfer_inside, after](const at::Tensor& in) {
      return net_.ForwardSegments(transfer_inside ? batches_.ToDevice(in) : in, begin, end, /*training=*/true, after);
    };
    if (parallel_ && begin > 0) x = parallel_->BeforeSegment(begin, std::move(x));
    x = Checkpoint(segment, x, net_.segment_parameters(begin, end), p.checkpoint.preserve_rng_state);
    if (parallel_) x = parallel_->AfterSegment(end - 1, std::move(x));
    begin = end;
  }
  return parallel_ ? parallel_->AfterForward(std::move(x)) : x;
}

at::Tensor PitfallForward::ApplyInplaceKnob(const at::Tensor& out) const {
  const std::string& op = spec_.pitfalls.inplace.op;
  if (op == "mul_") return out.mul_(2.0);
  if (op == "add_") return out.add_(1.0);
  if (op == "mul") return out.mul(2.0);
  return out.add(1.0);
}

}  // namespace oomguard
