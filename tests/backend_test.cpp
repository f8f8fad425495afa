// model/backend.h: the closed set of backends, their names and plain traits (no LibTorch).
#include "model/backend.h"

#include <gtest/gtest.h>

namespace oomguard {
namespace {

TEST(Backend, NamesRoundTripInEnumOrder) {
  EXPECT_EQ(AllNames<Backend>(), (std::vector<std::string>{"cpu", "meta", "cuda"}));
  for (const BackendTraits& t : kBackendTraits) {
    Backend parsed = Backend::kCpu;
    ASSERT_TRUE(Parse(Name(t.backend), &parsed)) << Name(t.backend);
    EXPECT_EQ(parsed, t.backend);
    EXPECT_EQ(&TraitsOf(parsed), &t);  // the table is in enum order
  }
}

TEST(Backend, AutoAndUnknownNamesAreNoBackend) {
  Backend parsed = Backend::kMeta;
  EXPECT_FALSE(Parse("auto", &parsed));
  EXPECT_FALSE(Parse("CPU", &parsed));
  EXPECT_FALSE(Parse("", &parsed));
  EXPECT_EQ(parsed, Backend::kMeta);  // untouched
  EXPECT_EQ(FindBackendTraits("xpu"), nullptr);
  EXPECT_EQ(FindBackendTraits("meta"), &TraitsOf(Backend::kMeta));
  EXPECT_EQ(BackendNamed("cuda"), Backend::kCuda);
}

TEST(Backend, TraitsSayWhatEachBackendIs) {
  const BackendTraits& cpu = TraitsOf(Backend::kCpu);
  const BackendTraits& meta = TraitsOf(Backend::kMeta);
  const BackendTraits& cuda = TraitsOf(Backend::kCuda);
  // One variant at a time only where processes share the device.
  EXPECT_FALSE(cpu.shares_device);
  EXPECT_FALSE(meta.shares_device);
  EXPECT_TRUE(cuda.shares_device);
  // Gradients have values everywhere but on meta.
  EXPECT_TRUE(cpu.has_data);
  EXPECT_FALSE(meta.has_data);
  EXPECT_TRUE(cuda.has_data);
  // Only cpu's account would book the host's wrapped-number copies and is host memory.
  EXPECT_TRUE(cpu.books_host_scalars);
  EXPECT_FALSE(meta.books_host_scalars);
  EXPECT_FALSE(cuda.books_host_scalars);
  EXPECT_TRUE(cpu.allocates_host_memory);
  EXPECT_FALSE(meta.allocates_host_memory);
  EXPECT_FALSE(cuda.allocates_host_memory);
  // The real caching allocator and the libraries' workspaces exist on cuda only.
  EXPECT_FALSE(cpu.has_caching_allocator || meta.has_caching_allocator);
  EXPECT_TRUE(cuda.has_caching_allocator);
  EXPECT_FALSE(cpu.has_library_workspaces || meta.has_library_workspaces);
  EXPECT_TRUE(cuda.has_library_workspaces);
  // Real ranks: cpu's on Gloo, cuda's on NCCL with a GPU each; meta simulates one rank.
  EXPECT_TRUE(cpu.real_ranks && cuda.real_ranks);
  EXPECT_FALSE(meta.real_ranks);
  EXPECT_TRUE(cuda.device_per_rank);
  EXPECT_FALSE(cpu.device_per_rank || meta.device_per_rank);
}

}  // namespace
}  // namespace oomguard
