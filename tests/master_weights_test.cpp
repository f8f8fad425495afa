// Mixed-precision Adam (Note [Master weights], workload/loop/master_weights.h): per rank, a bf16 model's
// parameter, gradient and optimizer-state bytes are the ZeRO paper's figures for each stage, 2 + 2 + 12
// bytes per parameter divided as the stage divides them, plus the padding each strategy adds; without
// master weights, the pure-bf16 figures as LibTorch keeps them (2 + 2 + 4: Adam's moments in bf16).
#include "workload/loop/master_weights.h"

#include <gtest/gtest.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tests/parallel_mlp.h"
#include "tests/scenario_text.h"
#include "workload/loop/optimizer.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

// The MLP of tests/parallel_mlp.h: linear 64 -> 128, linear 128 -> 64 (and, `odd`, linear 64 -> 3),
// each a weight [out, in] and a bias [out]: (dim 0 rows, elements per row).
std::vector<std::pair<int64_t, int64_t>> Parameters(bool odd) {
  std::vector<std::pair<int64_t, int64_t>> p = {{128, 64}, {128, 1}, {64, 128}, {64, 1}};
  if (odd) p.insert(p.end(), {{3, 64}, {3, 1}});
  return p;
}

int64_t Count(bool odd) {
  int64_t n = 0;
  for (const auto& [rows, rest] : Parameters(odd)) n += rows * rest;
  return n;
}

struct RankBytes {
  int64_t params = 0, grads = 0, state = 0;
  bool operator==(const RankBytes&) const = default;
};

std::ostream& operator<<(std::ostream& os, const RankBytes& b) {
  return os << "{params " << b.params << ", grads " << b.grads << ", state " << b.state << "}";
}

// What rank `rank` of `world` holds with bf16 parameters and gradients (2 bytes an element) and, with
// master weights, 12 bytes of optimizer state per element it steps (4 without: bf16 Adam), from each
// strategy's documented padding rule:
// * none (world 1), ddp: every parameter, no padding.
// * zero1, zero2 (Note [One simulated rank], workload/parallel/data_parallel.h): the flat buffer padded
//   to a multiple of 2 x world elements, S = padded / world a rank, which owns [rank S, (rank+1) S);
//   Between backward and the step both stages hold the whole gradients of the parameters the slice
//   crosses and zeros for its padding, S - (its parameters' elements), with master weights and without
//   (Note [Gradients between backward and step], workload/parallel/data_parallel.h; stage_1_and_2.py at
//   38327e0: get_partition_info 1617-1634, copy_grads_in_partition 1344-1360, get_flat_partition's
//   zeros 1755-1756, zero_grad at the end of backward 807). Without master
//   weights the rank steps the elements of its slice that are parameters. With them it steps
//   DeepSpeed's flat partition (Note [Master weights], workload/loop/master_weights.h:
//   stage_1_and_2.py's single_partition_of_fp32_groups), all S elements, padding included.
// * fsdp (Note [One FSDP2 rank], workload/parallel/fully_sharded.h): each parameter chunked on dim 0,
//   c = ceil(rows / world) rows a rank, its padded shard c rows; the rank steps its own rows, up to c;
//   its gradients are the reduce-scatter outputs, the padded shards.
RankBytes Expected(const std::string& strategy, int64_t world, int64_t rank, bool odd, bool master) {
  const int64_t n = Count(odd), state = master ? 12 : 4;
  if (strategy == "none" || strategy == "ddp") return {2 * n, 2 * n, state * n};
  if (strategy == "fsdp") {
    int64_t padded = 0, mine = 0;
    for (const auto& [rows, rest] : Parameters(odd)) {
      const int64_t c = (rows + world - 1) / world;
      padded += c * rest;
      mine += std::clamp<int64_t>(rows - rank * c, 0, c) * rest;
    }
    return {2 * padded, 2 * padded, state * mine};
  }
  const int64_t padded = (n + 2 * world - 1) / (2 * world) * (2 * world), shard = padded / world;
  const int64_t owned = std::clamp<int64_t>(n - rank * shard, 0, shard);
  int64_t crossed = 0, at = 0;  // get_partition_info's params_in_partition, whole
  for (const auto& [rows, rest] : Parameters(odd)) {
    if (at < (rank + 1) * shard && at + rows * rest > rank * shard) crossed += rows * rest;
    at += rows * rest;
  }
  return {2 * padded, 2 * crossed + 2 * (shard - owned), state * (master ? shard : owned)};
}

VariantSpec BfloatMlp(const std::string& strategy, int64_t world, int64_t rank, bool odd, bool master) {
  VariantSpec v = testing::ParallelMlp(strategy == "none" ? "ddp" : strategy, world, rank, odd, /*bf16=*/true);
  v.loop.optimizer.kind = "adam";
  v.loop.optimizer.master_weights = master;
  return v;
}

RankBytes Measured(const VariantSpec& spec) {
  const VariantMeasurement m = testing::MeasurePassing(spec, Backend::kMeta);
  return {m.param_bytes, m.grad_bytes.value_or(-1), m.optimizer_state_bytes.value_or(-1)};
}

// The ZeRO paper's table, for the MLP whose N = 16576 (a multiple of 2 x 8, and each dim 0 of 8: no
// padding): 2 + 2 + 12 (ddp), 2 + 12/W (zero1, zero2), (2 + 2 + 12)/W (fsdp) bytes of parameters and
// state. The gradients the paper gives zero2, 2/W, are DeepSpeed's whole gradients of the parameters
// the last rank's partition crosses, in both stages: at world 2 [8288, 16576) starts in bias 1
// ([8192, 8320)): 128 + 8192 + 64 = 8384 elements; at world 4 [12432, ...) and at 8 [14504, ...) start
// in weight 2 ([8320, 16512)): 8192 + 64 = 8256.
TEST(MasterWeights, EachRankHoldsTheZeroPapersMixedPrecisionFigures) {
  const int64_t n = Count(false);
  EXPECT_EQ(Measured(BfloatMlp("none", 1, 0, false, true)), (RankBytes{2 * n, 2 * n, 12 * n}));
  for (const int64_t w : {2, 4, 8}) {
    SCOPED_TRACE("world " + std::to_string(w));
    const int64_t crossed = w == 2 ? 8384 : 8256;
    EXPECT_EQ(Measured(BfloatMlp("ddp", w, 0, false, true)), (RankBytes{2 * n, 2 * n, 12 * n}));
    EXPECT_EQ(Measured(BfloatMlp("zero1", w, w - 1, false, true)), (RankBytes{2 * n, 2 * crossed, 12 * n / w}));
    EXPECT_EQ(Measured(BfloatMlp("zero2", w, w - 1, false, true)), (RankBytes{2 * n, 2 * crossed, 12 * n / w}));
    EXPECT_EQ(Expected("zero1", w, w - 1, false, true).grads, 2 * crossed);
    EXPECT_EQ(Measured(BfloatMlp("fsdp", w, w - 1, false, true)), (RankBytes{2 * n / w, 2 * n / w, 12 * n / w}));
  }
  // world 8, in all: ddp 265216 bytes a rank, zero1 and zero2 2 x 16576 + 2 x 8256 + 12 x 2072 = 74528
  // (the paper's zero2: 62160), fsdp 33152.
  EXPECT_EQ(2 * n + 2 * 8256 + 12 * n / 8, 74528);
}

// The reports say a rank's optimizer stepped float32 masters (ParallelMeasurement::master_weights), and
// say nothing of FSDP2's policy, which a bf16 model does not take.
TEST(MasterWeights, TheRanksFactsSayTheOptimizerStepsMasters) {
  for (const std::string strategy : {"ddp", "zero1", "zero2", "fsdp"}) {
    for (const bool master : {false, true}) {
      const VariantMeasurement m = testing::MeasurePassing(BfloatMlp(strategy, 2, 1, false, master), Backend::kMeta);
      ASSERT_TRUE(m.parallel.has_value()) << strategy;
      EXPECT_EQ(m.parallel->master_weights, master) << strategy;
      EXPECT_EQ(m.parallel->param_dtype, "") << strategy;
      EXPECT_EQ(m.parallel->reduce_dtype, "") << strategy;
    }
  }
}

// The same with the padding each strategy adds (N = 16771, the 3-row layer's chunks), on the first
// and the last rank, with master weights (12 bytes of state an element stepped) and without (4).
TEST(MasterWeights, PaddingFollowsEachStrategysRuleWithAndWithoutMasterWeights) {
  for (const bool master : {true, false}) {
    EXPECT_EQ(Measured(BfloatMlp("none", 1, 0, true, master)), Expected("none", 1, 0, true, master));
    for (const int64_t w : {2, 4, 8}) {
      for (const std::string strategy : {"ddp", "zero1", "zero2", "fsdp"}) {
        for (const int64_t rank : {int64_t{0}, w - 1}) {
          SCOPED_TRACE(strategy + " rank " + std::to_string(rank) + " of " + std::to_string(w) +
                       (master ? ", master weights" : ", pure bf16"));
          EXPECT_EQ(Measured(BfloatMlp(strategy, w, rank, true, master)), Expected(strategy, w, rank, true, master));
        }
      }
    }
  }
  // At world 8 DeepSpeed pads 16771 to 16784 (the multiple of 2 x 8 above it), S = 2098. Rank 0 holds
  // parameters only: a master of 2098 elements. Rank 7's partition [14686, 16784) holds 16771 - 14686 =
  // 2085 parameter elements and 13 of padding, and its master is all 2098 (bf16 Adam steps the 2085).
  // Rank 0's [0, 2098) lies in weight 1 (8192 elements); rank 7's starts in weight 2 ([8320, 16512)):
  // 8192 + 64 + 192 + 3 = 8451 whole, and the 13 of padding.
  EXPECT_EQ(Expected("zero1", 8, 0, true, true), (RankBytes{2 * 16784, 2 * 8192, 12 * 2098}));
  EXPECT_EQ(Expected("zero1", 8, 7, true, true), (RankBytes{2 * 16784, 2 * 8451 + 2 * 13, 12 * 2098}));
  EXPECT_EQ(Expected("zero2", 8, 7, true, true), (RankBytes{2 * 16784, 2 * 8451 + 2 * 13, 12 * 2098}));
  EXPECT_EQ(Expected("zero2", 8, 7, true, false), (RankBytes{2 * 16784, 2 * 8451 + 2 * 13, 4 * 2085}));
  // At world 2: 16772 (1 element of padding), S = 8386, rank 1's [8386, 16772) starts in weight 2 too:
  // the brief's 8451 against a shard's 8386; at world 4: 16776 (5), S = 4194, rank 3's [12582, 16776).
  EXPECT_EQ(Expected("zero1", 2, 1, true, true), (RankBytes{2 * 16772, 2 * 8451 + 2 * 1, 12 * 8386}));
  EXPECT_EQ(Expected("zero1", 4, 3, true, true), (RankBytes{2 * 16776, 2 * 8451 + 2 * 5, 12 * 4194}));
  // fsdp at world 8: the 3-row layer's chunks are 1 row; rank 7 has none of its 64 + 1 elements.
  EXPECT_EQ(Expected("fsdp", 8, 7, true, true).state, 12 * (Count(false) / 8));
}

// The optimizer phase's peak relative to the second iteration's end (E: every 16-bit gradient freed by
// the step, the optimizer state there).
int64_t StepPeakOverTheEnd(const VariantSpec& spec) {
  const VariantMeasurement m = testing::MeasurePassing(spec, Backend::kMeta);
  EXPECT_EQ(m.iterations.size(), 2u);
  const auto optimizer = std::find_if(m.ledger.phase_peaks.begin(), m.ledger.phase_peaks.end(),
                                      [](const PhasePeak& p) { return p.phase == "optimizer"; });
  EXPECT_NE(optimizer, m.ledger.phase_peaks.end());
  // Both iterations end with the same bytes live: no gradient, 16-bit or float32, outlives a step.
  EXPECT_EQ(m.iterations.front().live_after_bytes, m.iterations.back().live_after_bytes);
  return optimizer->peak_bytes - m.iterations.back().live_after_bytes;
}

// The step's peak with master weights as DeepSpeed's step() orders it (Note [Master weights]): it
// starts with the whole 16-bit gradients of the parameters the partition crosses and the padding's zeros
// (Note [Gradients between backward and step], workload/parallel/data_parallel.h), and flattens its
// list of views of them into a copy of S elements, cast to float32.
// zero2, SGD with momentum (no temporaries of its own), rank 1 of 2 of the odd MLP: padded to 16772,
// S = 8386, the partition [8386, 16772) starts in linear 2's weight ([8320, 16512)), crosses its bias and
// linear 3 (8192 + 64 + 192 + 3 = 8451 elements whole) and ends in 1 element of padding. At the cast
// those (2 x 8451 + 2 x 1 bytes), the copy (2 S) and the float32 gradient (4 S) are live together:
// E + 16904 + 6 S, the second step's (the first has no momentum buffer yet, and the buffer clone comes
// after the 16-bit gradients are gone: E - 4 S + 16904 + 6 S, then E - 4 S + 4 S + 4 S).
// DeepSpeed's statements in eager PyTorch peak as high: tests/zero_master_step_check.py.
// zero1, Adam, rank 7 of 8 (S = 2098, [14686, 16784), 13 of padding): the same 8451 elements whole, so
// the cast is E + 2 x 8451 + 2 x 13 + 6 S = E + 29516, over Adam's float32 gradient with its
// denominator's two temporaries (E + 4 S + 8 S = E + 25176) and over the step's start (E + 16928).
TEST(MasterWeights, ZeroStepsDeepSpeedsFlatPartitionAndFreesTheSixteenBitGradientsBeforeStepping) {
  VariantSpec sgd = BfloatMlp("zero2", 2, 1, true, true);
  sgd.loop.optimizer.kind = "sgd";
  sgd.loop.optimizer.momentum = 0.9;
  constexpr int64_t kS2 = 8386;
  EXPECT_EQ(StepPeakOverTheEnd(sgd), 2 * 8451 + 2 * 1 + 2 * kS2 + 4 * kS2);
  constexpr int64_t kS8 = 2098;
  EXPECT_EQ(StepPeakOverTheEnd(BfloatMlp("zero1", 8, 7, true, true)), 2 * 8451 + 2 * 13 + 6 * kS8);
  EXPECT_EQ(2 * 8451 + 2 * 13 + 6 * kS8, 29516);
  EXPECT_LT(4 * kS8 + 8 * kS8, 29516);
}

// The master copies are state from setup on: an OOM in the first forward counts them as optimizer
// state, not as activations.
TEST(MasterWeights, AnOomBeforeTheFirstStepCountsTheMastersAsOptimizerState) {
  VariantSpec v = BfloatMlp("zero2", 4, 0, false, true);
  VariantMeasureOptions options{.backend = Backend::kMeta};
  options.limits.cap_bytes = 2 * Count(false) + 4 * Count(false) / 4 + 1024;
  const VariantMeasurement m = MeasureVariant(v, options);
  ASSERT_EQ(Name(m.outcome), "oom") << m.error;
  EXPECT_EQ(m.oom->phase, "forward");
  EXPECT_EQ(m.oom->live.optimizer_state_bytes, 4 * Count(false) / 4);
}

// Two steps of Adam (lr 0.1) through MasterWeights over bf16 copies of `init`, with bf16 `grads`.
std::vector<at::Tensor> StepTwice(const std::vector<at::Tensor>& init, const std::vector<at::Tensor>& grads,
                                  int64_t group_elements) {
  std::vector<at::Tensor> stepped;
  for (const at::Tensor& t : init) stepped.push_back(t.to(at::kBFloat16).requires_grad_(true));
  MasterWeights opt(
      stepped,
      [](const std::vector<at::Tensor>& masters) {
        return std::make_unique<torch::optim::Adam>(masters, torch::optim::AdamOptions(0.1));
      },
      group_elements);
  EXPECT_EQ(StateBytesBeforeTheFirstStep(opt), 4 * (15 + 7));  // the float32 masters
  for (int step = 0; step < 2; ++step) {
    for (size_t i = 0; i < stepped.size(); ++i) stepped[i].mutable_grad() = grads[i].to(at::kBFloat16);
    opt.step();
  }
  EXPECT_EQ(OptimizerStateBytes(opt), 12 * (15 + 7));  // and Adam's float32 moments
  return stepped;
}

// The values: the masters step as float32 Adam over float32 copies would, the bf16 tensors are the
// masters rounded, and stepping a group a tensor (fsdp's sub-groups) changes only when the casts live.
TEST(MasterWeights, TheMastersStepAsFloat32AdamAndAreCopiedBack) {
  at::manual_seed(0);
  const std::vector<at::Tensor> init = {at::randn({5, 3}), at::randn({7})};
  const std::vector<at::Tensor> grads = {at::randn({5, 3}), at::randn({7})};
  std::vector<at::Tensor> reference;
  for (const at::Tensor& t : init) reference.push_back(t.to(at::kBFloat16).to(at::kFloat).requires_grad_(true));
  torch::optim::Adam adam(reference, torch::optim::AdamOptions(0.1));
  for (int step = 0; step < 2; ++step) {
    for (size_t i = 0; i < reference.size(); ++i) {
      reference[i].mutable_grad() = grads[i].to(at::kBFloat16).to(at::kFloat);
    }
    adam.step();
  }
  for (const int64_t group_elements : {int64_t{0}, int64_t{1}}) {
    const std::vector<at::Tensor> stepped = StepTwice(init, grads, group_elements);
    for (size_t i = 0; i < stepped.size(); ++i) {
      EXPECT_EQ(stepped[i].scalar_type(), at::kBFloat16);
      EXPECT_TRUE(at::equal(stepped[i].detach(), reference[i].detach().to(at::kBFloat16))) << group_elements;
      EXPECT_FALSE(at::equal(stepped[i].detach(), init[i].to(at::kBFloat16)));  // it moved
    }
  }
}

// The loader's whole message, at the key's path (an input error: exit 2).
TEST(MasterWeights, TheLoaderRefusesThemWhereTheyMeanNothing) {
  using testing::LoadError;
  using testing::With;
  EXPECT_EQ(LoadError(With(R"("loop": {"optimizer": {"kind": "adam", "master_weights": true}})")),
            "s.json: at loop.optimizer.master_weights: master weights are a float32 copy of a bfloat16 or float16 "
            "model; model.dtype is float32, whose parameters are their own master: set model.dtype \"bfloat16\" or "
            "\"float16\", or leave master_weights out (variant a)");
  EXPECT_EQ(LoadError(With(R"("model": {"dtype": "bfloat16", "layers": [{"kind": "linear", "in": 4, "out": 2}]},
                              "loop": {"optimizer": {"kind": "none", "master_weights": true}})")),
            "s.json: at loop.optimizer.master_weights: master weights are what an optimizer steps: "
            "loop.optimizer.kind is \"none\" (give \"adam\", \"adamw\" or \"sgd\", or leave master_weights out) "
            "(variant a)");
  EXPECT_EQ(LoadError(With(R"("loop": {"optimizer": {"master_weights": 1}})")),
            "s.json: at loop.optimizer.master_weights: expected true or false, got 1");
  const Scenario ok =
      testing::Load(With(R"("model": {"dtype": "float16", "layers": [{"kind": "linear", "in": 4, "out": 2}]},
                                            "loop": {"optimizer": {"kind": "sgd", "master_weights": true}})"));
  EXPECT_TRUE(ok.variants.at(0).loop.optimizer.master_weights);
}

}  // namespace
}  // namespace oomguard
