// Checkpoint against the plain model it stands for: the same gradients bit for bit, the segment run once more
// in backward, and the forward's activations gone from the ledger, to the byte.
#include "nn/checkpoint.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "allocators/install.h"

namespace oomguard {
namespace {

// --- A small MLP (5 -> 16 -> 16 -> 3, tanh between layers) in float64 ---

struct Mlp {
  std::vector<at::Tensor> weights, biases;
  std::vector<at::Tensor> Params() const {
    return {weights[0], biases[0], weights[1], biases[1], weights[2], biases[2]};
  }
};

Mlp MakeMlp() {
  at::manual_seed(0);
  Mlp mlp;
  const std::pair<int64_t, int64_t> shapes[] = {{16, 5}, {16, 16}, {3, 16}};
  for (auto [out, in] : shapes) {
    mlp.weights.push_back(at::randn({out, in}, at::kDouble).requires_grad_());
    mlp.biases.push_back(at::randn({out}, at::kDouble).requires_grad_());
  }
  return mlp;
}

// Layers [first, last) of the MLP as one segment; dropout (p = 0.5) on the segment's input when asked.
Segment Layers(const Mlp& mlp, int first, int last, bool dropout = false) {
  return [=](const at::Tensor& x) {
    at::Tensor h = dropout ? at::dropout(x, 0.5, /*train=*/true) : x;
    for (int i = first; i < last; ++i) {
      h = at::linear(h, mlp.weights[i], mlp.biases[i]);
      if (i < 2) h = at::tanh(h);
    }
    return h;
  };
}

struct Plan {
  std::vector<int> cuts;  // segment boundaries: {0, 1, 3} is layers [0, 1) and [1, 3)
  std::vector<bool> checkpointed;
  bool preserve_rng_state = true;
  std::vector<bool> dropout = {};  // per segment, dropout on its input; none when empty
};

struct Result {
  at::Tensor out;
  std::vector<at::Tensor> grads;  // of x, then of each parameter
};

// Seeds the generator, runs forward and backward of loss = sum(out^2) `rounds` times (accumulating .grad), and
// returns the last output with the gradients.
Result Train(const Plan& plan, int rounds = 1) {
  Mlp mlp = MakeMlp();
  at::Tensor x = at::randn({8, 5}, at::kDouble).requires_grad_();
  at::manual_seed(1);
  Result result;
  for (int round = 0; round < rounds; ++round) {
    at::Tensor h = x;
    for (size_t s = 0; s + 1 < plan.cuts.size(); ++s) {
      Segment segment = Layers(mlp, plan.cuts[s], plan.cuts[s + 1], !plan.dropout.empty() && plan.dropout[s]);
      h = plan.checkpointed[s] ? Checkpoint(segment, h, mlp.Params(), plan.preserve_rng_state) : segment(h);
    }
    (h * h).sum().backward();
    result.out = h.detach();
  }
  result.grads.push_back(x.grad());
  for (const at::Tensor& p : mlp.Params()) result.grads.push_back(p.grad());
  return result;
}

void ExpectIdentical(const Result& actual, const Result& expected) {
  EXPECT_TRUE(at::equal(actual.out, expected.out));
  ASSERT_EQ(actual.grads.size(), 7u);
  for (size_t i = 0; i < actual.grads.size(); ++i) {
    ASSERT_TRUE(actual.grads[i].defined()) << "gradient " << i;
    EXPECT_TRUE(at::equal(actual.grads[i], expected.grads[i])) << "gradient " << i;
  }
}

TEST(Checkpoint, GradientsEqualThePlainModelsBitForBit) {
  const Result plain = Train({{0, 3}, {false}});
  ExpectIdentical(Train({{0, 3}, {true}}), plain);                     // the whole model
  ExpectIdentical(Train({{0, 1, 3}, {false, true}}), plain);           // the last two layers
  ExpectIdentical(Train({{0, 1, 2, 3}, {true, true, false}}), plain);  // the first two, one each
  ExpectIdentical(Train({{0, 1, 2, 3}, {true, true, true}}), plain);   // every layer
  ExpectIdentical(Train({{0, 1, 2, 3}, {true, true, true}}, 2), Train({{0, 3}, {false}}, 2));  // .grad accumulates
}

TEST(Checkpoint, ParameterSharedBySegmentsGetsTheSumOfItsGradients) {
  // The same 16x16 layer applied twice, in two checkpoints, against applying it twice directly.
  auto run = [](bool checkpointed) {
    at::manual_seed(0);
    at::Tensor w = at::randn({16, 16}, at::kDouble).requires_grad_();
    at::Tensor x = at::randn({4, 16}, at::kDouble).requires_grad_();
    Segment layer = [w](const at::Tensor& h) { return at::tanh(at::matmul(h, w)); };
    at::Tensor h = x;
    for (int i = 0; i < 2; ++i) h = checkpointed ? Checkpoint(layer, h, {w}, false) : layer(h);
    h.sum().backward();
    return std::vector<at::Tensor>{w.grad(), x.grad()};
  };
  std::vector<at::Tensor> plain = run(false), checkpointed = run(true);
  EXPECT_TRUE(at::equal(checkpointed[0], plain[0]));
  EXPECT_TRUE(at::equal(checkpointed[1], plain[1]));
}

TEST(Checkpoint, PreservedRngStateReplaysTheDropoutMask) {
  // Dropout before layers 2 and 3; layer 2 alone is checkpointed, so layer 3's mask is drawn between the
  // checkpoint's forward and its recomputation.
  const Plan plain{{0, 1, 2, 3}, {false, false, false}, true, {false, true, true}};
  const Result expected = Train(plain);
  const at::Tensor expected_next_draw = at::rand({8});

  Plan replayed = plain;
  replayed.checkpointed = {false, true, false};
  ExpectIdentical(Train(replayed), expected);
  EXPECT_TRUE(at::equal(at::rand({8}), expected_next_draw));  // the caller's stream is where it would be

  Plan redrawn = replayed;
  redrawn.preserve_rng_state = false;
  const Result actual = Train(redrawn);
  EXPECT_TRUE(at::equal(actual.out, expected.out));  // the forward draws the same masks...
  // ...the recomputation a new one for layer 2: gradients up to layer 2 differ, layer 3's do not.
  const char* names[] = {"x", "w1", "b1", "w2", "b2", "w3", "b3"};
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(at::equal(actual.grads[i], expected.grads[i]), i >= 5) << names[i];
  EXPECT_FALSE(at::equal(at::rand({8}), expected_next_draw));  // and it drew from the caller's stream
}

TEST(Checkpoint, RunsTheSegmentOnceInForwardAndOnceMoreInBackward) {
  at::manual_seed(0);
  at::Tensor w = at::randn({4, 4}).requires_grad_();
  at::Tensor x = at::randn({2, 4});
  int calls = 0;
  Segment segment = [w, &calls](const at::Tensor& h) {
    ++calls;
    return at::tanh(at::matmul(h, w));
  };
  at::Tensor out = Checkpoint(segment, x, {w}, true);
  EXPECT_EQ(calls, 1);
  out.sum().backward();
  EXPECT_EQ(calls, 2);
  Checkpoint(segment, x, {w}, false).sum().backward();
  EXPECT_EQ(calls, 4);

  {
    c10::NoGradGuard no_grad;  // nothing to recompute for: the segment runs once and nothing is kept
    EXPECT_FALSE(Checkpoint(segment, x, {w}, true).requires_grad());
  }
  EXPECT_EQ(calls, 5);
  EXPECT_FALSE(Checkpoint(segment, x, {w.detach()}, true).requires_grad());  // nothing requires grad
  EXPECT_EQ(calls, 6);
}

TEST(Checkpoint, SegmentReturningALeafPassesTheGradientThrough) {
  at::Tensor x = at::arange(6, at::kDouble).requires_grad_();
  at::Tensor w = at::full({6}, 2.0, at::kDouble).requires_grad_();
  (Checkpoint([](const at::Tensor& h) { return h; }, x, {}, false) * 3).sum().backward();
  EXPECT_TRUE(at::equal(x.grad(), at::full({6}, 3.0, at::kDouble)));
  Checkpoint([w](const at::Tensor&) { return w; }, x, {w}, false).sum().backward();
  EXPECT_TRUE(at::equal(w.grad(), at::ones({6}, at::kDouble)));
}

TEST(Checkpoint, AutogradGradOfSomeInputsIsExactAndComputesOnlyThose) {
  // grad(loss, {w}) while x requires grad too (Python's reentrant checkpoint refuses this).
  at::manual_seed(0);
  at::Tensor w = at::randn({4, 4}, at::kDouble).requires_grad_();
  at::Tensor frozen = at::randn({4}, at::kDouble);  // listed, not requiring grad: gets nothing, costs nothing
  at::Tensor x = at::randn({3, 4}, at::kDouble);
  at::Tensor x_requiring_grad = x.clone().requires_grad_();
  Segment segment = [w, frozen](const at::Tensor& h) { return at::tanh(at::matmul(h, w) + frozen); };
  const at::Tensor plain = torch::autograd::grad({segment(x_requiring_grad).sum()}, {w})[0];

  Ledger& ledger = CpuAccount().ledger();
  auto grad_w = [&](const at::Tensor& input, int64_t* allocated_bytes) {
    ledger.ResetStatistics();
    at::Tensor grad = torch::autograd::grad({Checkpoint(segment, input, {w, frozen}, false).sum()}, {w})[0];
    *allocated_bytes = ledger.Snapshot().allocated_bytes_total;
    return grad;
  };
  int64_t allocated = 0, allocated_without_input_grad = 0;
  EXPECT_TRUE(at::equal(grad_w(x_requiring_grad, &allocated), plain));
  EXPECT_TRUE(at::equal(grad_w(x, &allocated_without_input_grad), plain));
  EXPECT_EQ(allocated, allocated_without_input_grad);  // no gradient for x was computed
  EXPECT_FALSE(frozen.grad().defined());
}

std::string BackwardError(const std::function<void()>& backward) {
  try {
    backward();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "no error";
}

TEST(Checkpoint, UnlistedParameterIsAnErrorInBackward) {
  at::Tensor w = at::ones({4, 3}).requires_grad_();
  at::Tensor v = at::ones({3}).requires_grad_();
  at::Tensor out =
      Checkpoint([w, v](const at::Tensor& h) { return at::matmul(h, w) * v; }, at::ones({2, 4}), {w}, false);
  EXPECT_EQ(BackwardError([&] { out.sum().backward(); }),
            "Checkpoint: the segment uses a tensor of shape [3] that requires grad but is not in `params`; its "
            "gradient would be lost");
}

TEST(Checkpoint, CreateGraphIsAnError) {
  at::Tensor w = at::ones({4, 4}).requires_grad_();
  at::Tensor out = Checkpoint([w](const at::Tensor& h) { return at::matmul(h, w); }, at::ones({2, 4}), {w}, false);
  EXPECT_EQ(BackwardError([&] { torch::autograd::grad({out.sum()}, {w}, {}, true, /*create_graph=*/true); }),
            "Checkpoint: create_graph=true is not supported; the recomputation starts from a detached input, so "
            "higher-order gradients through it would be lost");
}

TEST(Checkpoint, MetaInputKeepsNoGeneratorStateAndDifferentiates) {
  Ledger& cpu = CpuAccount().ledger();
  at::Tensor w = at::empty({64, 64}, at::kMeta).requires_grad_();
  at::Tensor x = at::empty({32, 64}, at::kMeta).requires_grad_();
  const int64_t cpu_before = cpu.live_bytes();
  at::Tensor out = Checkpoint([w](const at::Tensor& h) { return at::tanh(at::matmul(h, w)); }, x, {w}, true);
  EXPECT_EQ(cpu.live_bytes(), cpu_before);
  out.sum().backward();
  EXPECT_TRUE(w.grad().is_meta());
  EXPECT_EQ(w.grad().sizes(), w.sizes());
  EXPECT_EQ(x.grad().sizes(), x.sizes());
}

// --- Memory: 8 layers tanh(linear(h)) of width 64 on a batch of 1024, float32 ---
//
// Note [Checkpoint peaks]: one activation is A = 1024 * 64 * 4 bytes, one layer's parameters P = (64 * 64 + 64) *
// 4. Activations dominate, as in the models checkpointing is for. Each tanh(linear) keeps only its output (tanh's
// backward needs it; addmm needs its input, the previous output); its pre-activation z lives until tanh is done.
// A layer's backward holds two A-sized gradients at once (pre-activation, input), then its parameters' gradients.
// With k segments of L = 8 / k layers:
// - the forward of segment s holds the outputs of segments 1..s-1 (the last is its input) and, inside, the
//   previous layer's output, z and the new output: (s - 1) + 3 activations, or (s - 1) + 2 when L = 1;
// - the backward of segment s holds the outputs of segments 1..s-1 (saved inputs), the model output (held by the
//   caller), the incoming gradient unless s = k (then it is the caller's), all L recomputed activations (the
//   recomputed output is held until its grad() returns) and the two gradients: (s - 1) + 1 + [s < k] + L + 2
//   activations, plus the parameter gradients of segments s+1..k and of the current layer.
class CheckpointMemoryTest : public testing::Test {
 protected:
  static constexpr int64_t kA = 1024 * 64 * 4;
  static constexpr int64_t kP = (64 * 64 + 64) * 4;
  static constexpr int64_t kRngState = 5056;  // the cpu generator's state tensor

  struct Measured {
    int64_t forward_live = 0;  // bytes the forward left live (output included)
    int64_t forward_peak = 0;
    int64_t peak = 0;        // forward and backward together
    int64_t live_after = 0;  // after backward, model output dropped: only .grad
  };

  // segments = 0: no checkpointing.
  Measured Measure(int segments, bool preserve_rng_state) {
    Ledger& ledger = CpuAccount().ledger();
    at::manual_seed(0);
    std::vector<at::Tensor> params;
    for (int i = 0; i < 8; ++i) {
      params.push_back(at::randn({64, 64}).div_(8).requires_grad_());
      params.push_back(at::randn({64}).requires_grad_());
    }
    at::Tensor x = at::randn({1024, 64});
    at::Tensor grad_out = at::ones({1024, 64});
    auto layers = [&params](int first, int last) {
      std::vector<at::Tensor> mine(params.begin() + 2 * first, params.begin() + 2 * last);
      Segment segment = [mine](const at::Tensor& in) {
        at::Tensor h = in;
        for (size_t i = 0; i < mine.size(); i += 2) h = at::tanh(at::linear(h, mine[i], mine[i + 1]));
        return h;
      };
      return std::pair{segment, mine};
    };

    const int64_t base = ledger.live_bytes();
    ledger.ResetStatistics();
    at::Tensor out = x;
    if (segments == 0) {
      out = layers(0, 8).first(x);
    } else {
      for (int s = 0; s < segments; ++s) {
        auto [segment, mine] = layers(s * 8 / segments, (s + 1) * 8 / segments);
        out = Checkpoint(segment, out, mine, preserve_rng_state);
      }
    }
    Measured m;
    m.forward_live = ledger.live_bytes() - base;
    m.forward_peak = ledger.peak_bytes() - base;
    out.backward(grad_out);
    m.peak = ledger.peak_bytes() - base;
    out.reset();
    m.live_after = ledger.live_bytes() - base;
    return m;
  }
};

TEST_F(CheckpointMemoryTest, SegmentsKeepOnlyTheirBoundariesAndLowerThePeak) {
  EXPECT_EQ(at::globalContext().defaultGenerator(at::kCPU).get_state().nbytes(), kRngState);
  struct Row {
    int segments;
    int64_t forward_live, forward_peak, peak;
  };
  const Row rows[] = {
      {0, 8 * kA, 9 * kA, 10 * kA + kP},      // plain: 7 outputs + z + output; 8 outputs + 2 gradients
      {1, 1 * kA, 3 * kA, 11 * kA + kP},      // worse than plain: the recomputed output joins the caller's
      {2, 2 * kA, 4 * kA, 8 * kA + 5 * kP},   // peak at s = 1: 0 + 1 + 1 + 4 + 2, after 4 layers' gradients
      {4, 4 * kA, 6 * kA, 8 * kA + 3 * kP},   // s = 4 and s = 3 both hold 8 A; s = 3 after 2 layers' gradients
      {8, 8 * kA, 9 * kA, 11 * kA + 2 * kP},  // peak at s = 7: 6 + 1 + 1 + 1 + 2, after 1 layer's gradients
  };
  std::map<int, int64_t> peaks;
  for (const Row& row : rows) {
    for (bool rng : {false, true}) {
      SCOPED_TRACE(testing::Message() << row.segments << " segments, preserve_rng_state " << rng);
      // The saved generator states (kRngState bytes per checkpoint) are host memory, as on a GPU:
      // the same bytes with preserve_rng_state on or off.
      Measured m = Measure(row.segments, rng);
      EXPECT_EQ(m.forward_live, row.forward_live);
      EXPECT_EQ(m.forward_peak, row.forward_peak);
      EXPECT_EQ(m.peak, row.peak);
      EXPECT_EQ(m.live_after, 8 * kP);  // everything else was released
      if (rng) peaks[row.segments] = m.peak;
    }
  }
  EXPECT_LT(peaks[2], peaks[0]);
  EXPECT_LT(peaks[4], peaks[0]);
}

}  // namespace
}  // namespace oomguard
