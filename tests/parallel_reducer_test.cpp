// Why `parallel` ddp drives c10d::Reducer through a hook of its own (workload/parallel/data_parallel.cpp,
// FakeAllReduceHook): the Reducer as DDP builds it, over a ProcessGroup whose backend is LibTorch's
// FakeProcessGroup, fails its first backward on cpu (the default hook reads the all-reduce's future,
// which FakeWork completes with None) and on meta (ProcessGroup::allreduce dispatches c10d::allreduce_,
// whose Meta kernel only Python registers). Should a LibTorch release change either, these fail and
// the hook can go.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <torch/csrc/distributed/c10d/FakeProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

namespace oomguard {
namespace {

using ::testing::HasSubstr;

// One backward of a linear layer's weight and bias through a Reducer without a comm hook; the error.
std::string DefaultHookError(c10::Device device) {
  const at::TensorOptions options = at::TensorOptions().device(device);
  at::Tensor w = at::zeros({16, 16}, options).requires_grad_();
  at::Tensor b = at::zeros({16}, options).requires_grad_();
  auto group = c10::make_intrusive<c10d::ProcessGroup>(0, 2);
  group->setBackend(device.type(), c10d::ProcessGroup::CUSTOM, c10d::FakeProcessGroup::_create_internal(0, 2));
  group->setDefaultBackend(c10d::ProcessGroup::CUSTOM);
  c10d::Reducer reducer({w, b}, {{1, 0}}, group, {false, false}, 25 << 20, false, false, {}, 1 << 20, false, false, {});
  try {
    reducer.prepare_for_forward();
    at::Tensor loss = (at::matmul(at::ones({4, 16}, options), w) + b).sum();
    reducer.prepare_for_backward({});
    loss.backward();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

TEST(ParallelReducer, TheDefaultHookCannotReadFakeWorksFuture) {
  EXPECT_THAT(DefaultHookError(c10::Device(c10::kCPU)),
              HasSubstr("expected the hook result is either a Tensor or a TensorList found None"));
}

TEST(ParallelReducer, TheProcessGroupsAllReduceHasNoMetaKernelInCpp) {
  EXPECT_THAT(DefaultHookError(c10::Device(c10::kMeta)),
              HasSubstr("c10d::allreduce_: attempted to run this operator with Meta tensors"));
}

}  // namespace
}  // namespace oomguard
