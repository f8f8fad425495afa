// What memory this host can give a process: the kernel's /proc/meminfo and the cgroup (v2) limit a
// container runs under. For the backends that allocate what they measure in host memory (cpu): a cap
// the host cannot back is refused up front, host-side inputs are bounded, and a child the kernel's OOM
// killer ended is reported as that (Note [Host memory is part of the cap], allocators/device_account.h).
#pragma once

#include <cstdint>

namespace oomguard {

struct HostMemory {
  int64_t total_bytes = 0;      // MemTotal, or the cgroup's memory.max when lower; 0 when unknown
  int64_t available_bytes = 0;  // MemAvailable, or what the cgroup has left when lower; 0 when unknown
};

HostMemory ReadHostMemory();

// The cgroup's count of processes its OOM killer ended (memory.events "oom_kill"); -1 when unknown.
int64_t CgroupOomKills();

}  // namespace oomguard
