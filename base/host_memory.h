// What memory this host can give a process: the kernel's /proc/meminfo and the limits of the cgroups
// the process runs in (v2 memory.max, v1 memory.limit_in_bytes, their ancestors' too). For the backends
// that allocate what they measure in host memory (cpu): a cap the host cannot back is refused up front,
// host-side inputs are bounded, and a child the kernel's OOM killer ended is reported as that (Note
// [Host memory is part of the cap], allocators/device_account.h).
//
// Note [Which cgroup]
// A container's cgroup is rarely the file system's root: /proc/self/cgroup names the process's own
// (v2 "0::PATH", v1 "N:memory:PATH"), and /proc/self/mountinfo where each hierarchy is mounted (its
// root inside the hierarchy and its mount point). Both versions are read, since a host may mount v1's
// memory controller and an empty v2 tree side by side; a limit set on an ancestor binds too, so the
// lowest along the way counts. `root` prefixes every path read (""; a test's fake tree).
#pragma once

#include <cstdint>
#include <string>

namespace oomguard {

struct HostMemory {
  int64_t total_bytes = 0;      // MemTotal, or the lowest cgroup limit when lower; 0 when unknown
  int64_t available_bytes = 0;  // MemAvailable, or what that cgroup has left when lower; 0 when unknown
};

HostMemory ReadHostMemory(const std::string& root = "");

// The processes the OOM killer ended in this process's cgroups (v2 memory.events "oom_kill", v1
// memory.oom_control "oom_kill"), summed: a count that rises when one is killed; -1 when unknown.
int64_t CgroupOomKills(const std::string& root = "");

}  // namespace oomguard
