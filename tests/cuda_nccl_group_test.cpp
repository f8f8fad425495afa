// c10d's ProcessGroupNCCL made by name in LibTorch's CUDA library (allocators/cuda/nccl_group.h, Note
// [ProcessGroupNCCL by name]): without a GPU, NCCL's own constructor refuses, which proves the call
// reaches it whole; with one, a one-rank group runs its collectives on cuda:0 (ci/gpu_check.sh runs
// Cuda*; a world of 2 and more needs as many GPUs: Note [Ranks need a GPU each], run/rank_children.h).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include "allocators/cuda/cuda_cap.h"
#include "allocators/cuda/libtorch_cuda.h"
#include "allocators/cuda/nccl_group.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

c10::intrusive_ptr<c10d::Store> OneRankStore(const testing::ScratchFolder& folder) {
  return c10::make_intrusive<c10d::FileStore>(folder.path() + "/store", 1);
}

TEST(CudaNcclGroup, WithoutAGpuNcclsOwnConstructorIsReachedAndRefuses) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is visible: CudaNcclGroupOnGpu.* runs the group";
  std::string why;
  ASSERT_TRUE(LoadLibTorchCuda(&why)) << why;
  const testing::ScratchFolder folder("nccl");
  try {
    MakeNcclGroup(OneRankStore(folder), 0, 1, std::chrono::seconds(5));
    FAIL() << "ProcessGroupNCCL was made without a GPU";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ProcessGroupNCCL is only supported with GPUs, no GPUs found!"),
              std::string::npos)
        << e.what();
  }
}

TEST(CudaNcclGroupOnGpu, OneRankRunsNcclsCollectivesOnItsGpu) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no GPU visible (CUDA driver: " << CudaDriverVersion() << ")";
  std::string why;
  ASSERT_TRUE(LoadLibTorchCuda(&why)) << why;
  SetCurrentCudaDevice(0);
  const testing::ScratchFolder folder("nccl");
  const c10::intrusive_ptr<c10d::Backend> group = MakeNcclGroup(OneRankStore(folder), 0, 1, std::chrono::seconds(30));
  EXPECT_EQ(group->getBackendName(), "nccl");
  EXPECT_EQ(group->getRank(), 0);
  EXPECT_EQ(group->getSize(), 1);
  std::vector<at::Tensor> tensors = {at::arange(8, at::TensorOptions().device(at::kCUDA, 0).dtype(at::kFloat))};
  group->allreduce(tensors)->wait();
  at::Tensor gathered = at::empty({8}, tensors[0].options());
  group->_allgather_base(gathered, tensors[0])->wait();
  SynchronizeCurrentCudaStream();
  const at::Tensor expected = at::arange(8, at::TensorOptions().dtype(at::kFloat));
  EXPECT_TRUE(at::equal(tensors[0].cpu(), expected));  // a sum over one rank
  EXPECT_TRUE(at::equal(gathered.cpu(), expected));
}

}  // namespace
}  // namespace oomguard
