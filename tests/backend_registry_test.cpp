// backends/backend.h: the registry gives each Backend its driver, with its device and account, and
// sessions that carry the driver's facts.
#include <gtest/gtest.h>

#include <sstream>

#include "backends/backend.h"
#include "backends/version_info.h"
#include "base/exit_codes.h"
#include "run/measure_child.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

TEST(BackendRegistry, EachBackendHasItsDriver) {
  for (const BackendTraits& t : kBackendTraits) {
    const BackendDriver& driver = GetBackend(t.backend);
    EXPECT_EQ(driver.backend(), t.backend);
    EXPECT_EQ(driver.name(), Name(t.backend));
    EXPECT_EQ(&driver.traits(), &t);
  }
}

TEST(BackendRegistry, CpuAndMetaRunEverywhereOnTheirOwnDeviceAndAccount) {
  for (const Backend b : {Backend::kCpu, Backend::kMeta}) {
    const BackendDriver& driver = GetBackend(b);
    std::string why = "untouched";
    EXPECT_TRUE(driver.Available(&why));
    EXPECT_EQ(why, "untouched");
    EXPECT_TRUE(driver.compiled_in());
    EXPECT_EQ(driver.Status(), "ready");
    EXPECT_EQ(driver.account().device_name(), driver.name());
    const std::unique_ptr<BackendSession> session = driver.Open(Limits{});
    EXPECT_EQ(session->backend(), b);
    EXPECT_EQ(session->device(), driver.device());
    EXPECT_EQ(&session->account(), &driver.account());
    EXPECT_FALSE(session->StartOwnHistory(10));  // the account's trace records instead
    VariantMeasurement m;
    session->BeginMeasurement();
    session->Collect(&m);
    EXPECT_FALSE(m.cuda.has_value());
  }
  EXPECT_EQ(GetBackend(Backend::kCpu).device(), c10::Device(c10::kCPU));
  EXPECT_EQ(GetBackend(Backend::kMeta).device(), c10::Device(c10::kMeta));
}

TEST(BackendRegistry, ANamedRequestResolvesToThatBackend) {
  EXPECT_EQ(ResolveBackend("cpu"), Backend::kCpu);
  EXPECT_EQ(ResolveBackend("meta"), Backend::kMeta);
  EXPECT_EQ(ResolveBackend("cuda"), Backend::kCuda);
  std::string why;
  const Backend automatic = GetBackend(Backend::kCuda).Available(&why) ? Backend::kCuda : Backend::kCpu;
  EXPECT_EQ(ResolveBackend("auto"), automatic);
}

TEST(BackendRegistry, VersionInfoListsEveryBackendInEnumOrder) {
  const VersionInfo info = CollectVersionInfo();
  ASSERT_EQ(info.backends.size(), kBackendTraits.size());
  for (size_t i = 0; i < info.backends.size(); ++i) {
    const BackendDriver& driver = GetBackend(kBackendTraits[i].backend);
    EXPECT_EQ(info.backends[i].name, driver.name());
    EXPECT_EQ(info.backends[i].compiled_in, driver.compiled_in());
    EXPECT_EQ(info.backends[i].status, driver.Status());
  }
  EXPECT_EQ(info.backends[0].status, "ready");
  EXPECT_EQ(info.backends[1].status, "ready");
}

// A child asked for a backend that is no backend (by hand: `oomguard __measure --backend xpu ...`)
// refuses with a usage error before measuring anything.
TEST(BackendRegistry, AMeasuringChildRefusesANameThatIsNoBackend) {
  testing::ScratchFolder folder("backend-registry");
  MeasureRequest request;
  request.scenario_file = folder.Write("tiny.json", R"({
    "name": "tiny", "summary": "s",
    "model": {"layers": [{"kind": "relu"}]}, "data": {"batch": 1, "shape": [2], "on_host": false},
    "variants": {"base": {}}
  })");
  request.variant = "base";
  request.backend = "xpu";
  request.out_path = folder.path() + "/0.json";
  std::ostringstream err;
  EXPECT_EQ(MeasureInChild(request, err), kExitUsage);
  EXPECT_EQ(err.str(), "--backend xpu: not a backend (cpu, meta, cuda)\n");
}

}  // namespace
}  // namespace oomguard
