#include "base/host_memory.h"

#include <algorithm>
#include <fstream>
#include <string>

namespace oomguard {
namespace {

// A cgroup v2 file holding one number (or "max"); -1 when absent or unlimited.
int64_t CgroupValue(const char* file) {
  std::ifstream in(std::string("/sys/fs/cgroup/") + file);
  std::string text;
  if (!(in >> text) || text == "max" || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(text);
}

}  // namespace

HostMemory ReadHostMemory() {
  HostMemory host;
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemTotal:") host.total_bytes = kib * 1024;
    if (key == "MemAvailable:") host.available_bytes = kib * 1024;
  }
  const int64_t limit = CgroupValue("memory.max"), used = CgroupValue("memory.current");
  if (limit > 0) {
    host.total_bytes = host.total_bytes > 0 ? std::min(host.total_bytes, limit) : limit;
    if (used >= 0) host.available_bytes = std::min(host.available_bytes, std::max<int64_t>(limit - used, 0));
  }
  return host;
}

int64_t CgroupOomKills() {
  std::ifstream events("/sys/fs/cgroup/memory.events");
  std::string key;
  int64_t value = 0;
  while (events >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return -1;
}

}  // namespace oomguard
