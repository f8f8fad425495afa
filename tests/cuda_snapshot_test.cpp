// --snapshot-dir on the cuda backend: PyTorch's own history and pickle (allocators/cuda/
// cuda_history.h). Needs a GPU and skips without one; tests/check_memory_viz_snapshot.py checks the
// cpu and meta snapshots against PyTorch's consumers everywhere.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "allocators/cuda/cuda_cap.h"
#include "tests/scenario_text.h"
#include "tests/scratch_folder.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

// One linear layer over a batch too large for a 64 MiB cap (a 128 MiB output).
VariantSpec OneLargeLayer() {
  return testing::Load(R"({"name": "large", "summary": "s",
    "model": {"layers": [{"kind": "linear", "in": 32, "out": 128}]},
    "data": {"batch": 262144, "shape": [32]}, "loop": {"loss": "mean"}, "variants": {"large": {}}})")
      .variants.at(0);
}

TEST(CudaSnapshotOnGpu, AnOomWritesPyTorchsOwnSnapshot) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no GPU visible (CUDA driver: " << CudaDriverVersion() << ")";
  testing::ScratchFolder folder("cuda-snapshot");
  VariantMeasureOptions options{.backend = Backend::kCuda, .limits = LimitsForCap(int64_t{64} << 20)};
  options.snapshot.path = folder.path() + "/large.pickle";
  const VariantMeasurement m = MeasureVariant(OneLargeLayer(), options);
  EXPECT_EQ(Name(m.outcome), "oom") << m.error;
  ASSERT_EQ(m.snapshot, options.snapshot.path) << m.snapshot_error;
  std::ifstream in(m.snapshot, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  const std::string pickle = bytes.str();
  ASSERT_GE(pickle.size(), 2u);
  EXPECT_EQ(pickle[0], '\x80');  // PROTO
  for (const char* key : {"segments", "device_traces", "segment_alloc", "oom", "device_free"}) {
    EXPECT_NE(pickle.find(key), std::string::npos) << key;
  }
}

}  // namespace
}  // namespace oomguard
