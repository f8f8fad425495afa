// The one operator callback (Note [One op dispatch]): what it registers for which subscriptions, the
// order and contexts it hands out, and the transfer counter that watches only while a host block lives.
#include "ops/op_stream.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocators/cpu_tracking_allocator.h"
#include "allocators/install.h"
#include "workload/transfer_counter.h"

namespace oomguard {
namespace {

// Writes what it is told into a shared log, as "tag:start NAME", "tag:end NAME", "tag:node NAME".
class LoggingObserver : public OpObserver {
 public:
  LoggingObserver(std::string tag, std::vector<std::string>* log, bool make_context = false)
      : tag_(std::move(tag)), log_(log), make_context_(make_context) {}

  std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) override {
    log_->push_back(tag_ + ":start " + fn.name() + (fn.inputs().empty() ? "" : " with inputs"));
    if (!make_context_) return nullptr;
    auto context = std::make_unique<Tagged>();
    context->name = fn.name();
    return context;
  }
  void OnOpEnd(const at::RecordFunction& fn, at::ObserverContext* context) override {
    const auto* tagged = dynamic_cast<const Tagged*>(context);
    log_->push_back(tag_ + ":end " + fn.name() + (tagged ? " context " + tagged->name : "") +
                    (fn.outputs().empty() ? "" : " with outputs"));
  }
  void OnBackwardNode(const at::RecordFunction& fn) override { log_->push_back(tag_ + ":node " + fn.name()); }
  void OnBackwardNodeEnd(const at::RecordFunction& fn) override { log_->push_back(tag_ + ":node-end " + fn.name()); }

 private:
  struct Tagged final : at::ObserverContext {
    std::string name;
  };
  std::string tag_;
  std::vector<std::string>* log_;
  bool make_context_;
};

// The entries of `log` about `op` (starts and ends of that name), in order.
std::vector<std::string> About(const std::vector<std::string>& log, const std::string& op) {
  std::vector<std::string> out;
  for (const std::string& line : log) {
    if (line.find(" " + op) != std::string::npos) out.push_back(line);
  }
  return out;
}

TEST(OpStream, RegistersNothingWithoutSubscriptions) {
  const OpStreamState state = CurrentOpStream();
  EXPECT_FALSE(state.registered);
  EXPECT_EQ(state.subscriptions, 0);
}

TEST(OpStream, BackwardNodesAloneLeaveOperatorsOnTheFastPath) {
  std::vector<std::string> log;
  LoggingObserver nodes("trace", &log);
  {
    OpSubscription subscription(&nodes, {.backward_nodes = true});
    const OpStreamState state = CurrentOpStream();
    EXPECT_TRUE(state.registered);
    EXPECT_TRUE(state.needs.backward_nodes);
    EXPECT_FALSE(state.needs.op_starts || state.needs.op_ends || state.needs.inputs || state.needs.outputs);
    at::Tensor x = at::ones({4}).requires_grad_();
    (x * 2).sum().backward();
  }
  // Nodes only, no operator (x * 2 is MulBackward1: a tensor times a Scalar).
  EXPECT_EQ(log, (std::vector<std::string>{"trace:node SumBackward0", "trace:node MulBackward1",
                                           "trace:node torch::autograd::AccumulateGrad"}));
  EXPECT_FALSE(CurrentOpStream().registered);
}

// What tells meta's add that autograd's engine runs between its nodes (backends/meta/meta_gradient_sums.h).
TEST(OpStream, BackwardNodeEndsComeAfterEachNodesFunction) {
  std::vector<std::string> log;
  LoggingObserver nodes("trace", &log);
  {
    OpSubscription subscription(&nodes, {.backward_nodes = true, .backward_node_ends = true});
    EXPECT_TRUE(CurrentOpStream().needs.backward_node_ends);
    EXPECT_FALSE(CurrentOpStream().needs.op_ends);
    at::Tensor x = at::ones({4}).requires_grad_();
    (x * 2).sum().backward();
  }
  EXPECT_EQ(log, (std::vector<std::string>{"trace:node SumBackward0", "trace:node-end SumBackward0",
                                           "trace:node MulBackward1", "trace:node-end MulBackward1",
                                           "trace:node torch::autograd::AccumulateGrad",
                                           "trace:node-end torch::autograd::AccumulateGrad"}));
}

TEST(OpStream, AsksForTheUnionAndCallsObserversInTheOrderTheySubscribed) {
  std::vector<std::string> log;
  LoggingObserver first("first", &log);
  LoggingObserver second("second", &log);
  OpSubscription a(&first, {.op_starts = true, .inputs = true});
  OpSubscription b(&second, {.op_starts = true, .op_ends = true, .outputs = true});
  const OpStreamState state = CurrentOpStream();
  EXPECT_TRUE(state.needs.op_starts && state.needs.op_ends && state.needs.inputs && state.needs.outputs);
  EXPECT_FALSE(state.needs.backward_nodes);
  EXPECT_EQ(state.subscriptions, 2);
  at::Tensor x = at::ones({3});
  at::Tensor y = at::neg(x);
  // Both see the inputs (RecordFunction boxes them for every callback); only `second` ends.
  EXPECT_EQ(About(log, "aten::neg"),
            (std::vector<std::string>{"first:start aten::neg with inputs", "second:start aten::neg with inputs",
                                      "second:end aten::neg with outputs"}));
}

TEST(OpStream, AnInactiveSubscriptionLeavesTheCallbackAndItsNeeds) {
  std::vector<std::string> log;
  LoggingObserver copies("copies", &log);
  LoggingObserver ops("ops", &log);
  OpSubscription watching_copies(&copies, {.op_starts = true, .inputs = true}, /*active=*/false);
  EXPECT_FALSE(CurrentOpStream().registered);
  OpSubscription watching_ops(&ops, {.op_starts = true});
  EXPECT_TRUE(CurrentOpStream().registered);
  EXPECT_FALSE(CurrentOpStream().needs.inputs);
  EXPECT_EQ(CurrentOpStream().active, 1);
  at::neg(at::ones({2}));
  watching_copies.SetActive(true);
  EXPECT_TRUE(CurrentOpStream().needs.inputs);
  at::neg(at::ones({2}));
  watching_copies.SetActive(false);
  EXPECT_FALSE(CurrentOpStream().needs.inputs);
  at::neg(at::ones({2}));
  EXPECT_EQ(About(log, "aten::neg"),
            (std::vector<std::string>{"ops:start aten::neg", "copies:start aten::neg with inputs",
                                      "ops:start aten::neg with inputs", "ops:start aten::neg"}));
}

TEST(OpStream, HandsEachObserverItsOwnContext) {
  std::vector<std::string> log;
  LoggingObserver with("with", &log, /*make_context=*/true);
  LoggingObserver without("without", &log);
  OpSubscription a(&with, {.op_starts = true, .op_ends = true});
  OpSubscription b(&without, {.op_starts = true, .op_ends = true});
  at::neg(at::ones({2}));
  EXPECT_EQ(About(log, "aten::neg"),
            (std::vector<std::string>{"with:start aten::neg", "without:start aten::neg",
                                      "with:end aten::neg context aten::neg", "without:end aten::neg"}));
}

TEST(OpStreamDeathTest, MoreSubscriptionsThanSlotsIsAProgrammersBug) {
  EXPECT_DEATH(
      {
        std::vector<std::string> log;
        LoggingObserver observer("x", &log);
        std::vector<std::unique_ptr<OpSubscription>> subscriptions;
        for (int i = 0; i <= OpSubscription::kMaxOpSubscriptions; ++i)
          subscriptions.push_back(std::make_unique<OpSubscription>(&observer, OpInterests{.op_starts = true}));
      },
      "more than 8 operator observers at once");
}

// Note [Watching while host blocks live]: on cpu and meta the counter asks for inputs only while a
// host block is alive, and still counts every transfer.
TEST(TransferCounter, WatchesOnlyWhileAHostBlockLives) {
  InstallTrackingAllocators();
  const int64_t blocks_before = LiveHostBlocks();
  ASSERT_EQ(blocks_before, 0);
  TransferCounter counter(nullptr, c10::DeviceType::CPU);
  EXPECT_FALSE(CurrentOpStream().registered);
  at::Tensor device = at::empty({256}, at::kFloat);
  {
    at::Tensor host;
    {
      HostAllocationScope scope;
      host = at::ones({256}, at::kFloat);
    }
    EXPECT_EQ(LiveHostBlocks(), 1);
    EXPECT_TRUE(CurrentOpStream().needs.inputs);
    device.copy_(host);
    device.copy_(host);
  }
  EXPECT_EQ(LiveHostBlocks(), 0);
  EXPECT_FALSE(CurrentOpStream().registered);
  device.copy_(at::ones({256}, at::kFloat));  // device to device: not a transfer, and not watched
  EXPECT_EQ(counter.count(), 2);
  EXPECT_EQ(counter.bytes(), 2 * 1024);
}

TEST(TransferCounter, OnCudaWatchesThroughout) {
  TransferCounter counter(nullptr, c10::DeviceType::CUDA);
  const OpStreamState state = CurrentOpStream();
  EXPECT_TRUE(state.registered);
  EXPECT_TRUE(state.needs.inputs);
  EXPECT_FALSE(state.needs.outputs);
}

}  // namespace
}  // namespace oomguard
