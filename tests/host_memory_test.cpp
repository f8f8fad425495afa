// Host memory and the OOM killer's count, read from a fake /proc and /sys tree (base/host_memory.h).
#include "base/host_memory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

class HostMemoryTest : public ::testing::Test {
 protected:
  // Writes `content` at `path` below the fake root, creating its folders.
  void Put(const std::string& path, const std::string& content) {
    for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
      mkdir((root_ + path.substr(0, slash)).c_str(), 0755);
    }
    std::ofstream(root_ + path) << content;
  }

  testing::ScratchFolder folder_{"host-memory"};
  const std::string root_ = folder_.path();
};

// D30 (issue 35): only /sys/fs/cgroup/memory.max and memory.events were read, at the root: in a 6 GiB
// v1 cgroup a 14 GiB cap was not refused. The process's own cgroup is found from /proc/self (Note
// [Which cgroup]), and a limit on an ancestor binds too.
TEST_F(HostMemoryTest, AV1LimitOnAnAncestorOfTheProcesssCgroupBinds) {
  Put("/proc/meminfo", "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n");
  Put("/proc/self/cgroup", "5:cpu,cpuacct:/\n4:memory:/box/job\n0::/\n");
  Put("/proc/self/mountinfo",
      "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  Put("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  Put("/sys/fs/cgroup/memory/box/memory.limit_in_bytes", std::to_string(6 * kGiB) + "\n");
  Put("/sys/fs/cgroup/memory/box/memory.usage_in_bytes", std::to_string(1 * kGiB) + "\n");
  Put("/sys/fs/cgroup/memory/box/job/memory.limit_in_bytes", "9223372036854771712\n");
  Put("/sys/fs/cgroup/memory/box/job/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
  Put("/sys/fs/cgroup/memory.max", std::to_string(1 * kGiB) + "\n");  // not this process's: ignored
  const HostMemory host = ReadHostMemory(root_);
  EXPECT_EQ(host.total_bytes, 6 * kGiB);
  EXPECT_EQ(host.available_bytes, 5 * kGiB);
  EXPECT_EQ(CgroupOomKills(root_), 3);
}

// D30: a v2 cgroup below the root, in a container whose mount shows its own cgroup as the root.
TEST_F(HostMemoryTest, AV2CgroupIsFoundBelowItsMountsRoot) {
  Put("/proc/meminfo", "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n");
  Put("/proc/self/cgroup", "0::/docker/abc/job\n");
  Put("/proc/self/mountinfo", "41 31 0:38 /docker/abc /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n");
  Put("/sys/fs/cgroup/memory.max", "max\n");
  Put("/sys/fs/cgroup/job/memory.max", std::to_string(2 * kGiB) + "\n");
  Put("/sys/fs/cgroup/job/memory.current", std::to_string(kGiB / 2) + "\n");
  Put("/sys/fs/cgroup/job/memory.events", "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n");
  const HostMemory host = ReadHostMemory(root_);
  EXPECT_EQ(host.total_bytes, 2 * kGiB);
  EXPECT_EQ(host.available_bytes, 3 * kGiB / 2);
  EXPECT_EQ(CgroupOomKills(root_), 1);
}

// Without cgroup files, the host's own numbers; and no count to compare.
TEST_F(HostMemoryTest, WithoutCgroupsTheHostsMemoryAndNoCount) {
  Put("/proc/meminfo", "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n");
  const HostMemory host = ReadHostMemory(root_);
  EXPECT_EQ(host.total_bytes, int64_t{24000000} * 1024);
  EXPECT_EQ(host.available_bytes, int64_t{20000000} * 1024);
  EXPECT_EQ(CgroupOomKills(root_), -1);
}

}  // namespace
}  // namespace oomguard
