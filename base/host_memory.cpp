#include "base/host_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace oomguard {
namespace {

// A v1 limit of "none" is the largest page-aligned int64 (9223372036854771712).
constexpr int64_t kNoLimit = int64_t{1} << 60;

// A file holding one number (or "max"); -1 when absent, unlimited or not a number.
int64_t NumberIn(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  const int64_t value = std::stoll(text);
  return value >= kNoLimit ? -1 : value;
}

// The value of `key` in a "key value" file (memory.events, memory.oom_control); -1 when absent.
int64_t KeyedNumberIn(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string name;
  int64_t value = 0;
  while (in >> name >> value) {
    if (name == key) return value;
  }
  return -1;
}

struct Cgroups {
  std::vector<std::string> v2;         // the process's cgroup folders, then their ancestors to the mount
  std::vector<std::string> v1_memory;  // the same for v1's memory controller
};

// `dir` and its parents, up to and including `top`.
std::vector<std::string> UpTo(std::string dir, const std::string& top) {
  std::vector<std::string> dirs;
  while (true) {
    dirs.push_back(dir);
    if (dir.size() <= top.size()) break;
    dir = dir.substr(0, dir.find_last_of('/'));
  }
  return dirs;
}

// Note [Which cgroup], host_memory.h.
Cgroups FindCgroups(const std::string& root) {
  std::string v2_path, v1_path;
  bool v2_named = false, v1_named = false;
  std::ifstream cgroup(root + "/proc/self/cgroup");
  for (std::string line; std::getline(cgroup, line);) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = "," + line.substr(first + 1, second - first - 1) + ",";
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers == ",,") {
      v2_path = path, v2_named = true;
    } else if (controllers.find(",memory,") != std::string::npos) {
      v1_path = path, v1_named = true;
    }
  }
  Cgroups found;
  std::ifstream mountinfo(root + "/proc/self/mountinfo");
  for (std::string line; std::getline(mountinfo, line);) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string field; fields >> field;) f.push_back(field);
    const auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) continue;
    const std::string& mount_root = f[3];
    const std::string& mount_point = f[4];
    const std::string& type = dash[1];
    const std::string options = "," + dash[3] + ",";
    const bool v2 = type == "cgroup2" && v2_named;
    const bool v1 = type == "cgroup" && v1_named && options.find(",memory,") != std::string::npos;
    if (!v2 && !v1) continue;
    const std::string& path = v2 ? v2_path : v1_path;
    // The cgroup's folder: its path inside the hierarchy, below what this mount shows of it.
    const std::string below = mount_root == "/" ? path
                              : path.rfind(mount_root, 0) == 0 ? path.substr(mount_root.size())
                                                                : std::string();
    std::string dir = root + mount_point + (below == "/" ? "" : below);
    (v2 ? found.v2 : found.v1_memory) = UpTo(dir, root + mount_point);
  }
  // No /proc to say: the conventional mount points' roots, as a container usually shows its own.
  if (found.v2.empty() && found.v1_memory.empty()) {
    found.v2 = {root + "/sys/fs/cgroup"};
    found.v1_memory = {root + "/sys/fs/cgroup/memory"};
  }
  return found;
}

}  // namespace

HostMemory ReadHostMemory(const std::string& root) {
  HostMemory host;
  std::ifstream meminfo(root + "/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemTotal:") host.total_bytes = kib * 1024;
    if (key == "MemAvailable:") host.available_bytes = kib * 1024;
  }
  const auto bound = [&](const std::string& dir, const char* limit_file, const char* usage_file) {
    const int64_t limit = NumberIn(dir + "/" + limit_file), used = NumberIn(dir + "/" + usage_file);
    if (limit <= 0) return;
    host.total_bytes = host.total_bytes > 0 ? std::min(host.total_bytes, limit) : limit;
    if (used >= 0) host.available_bytes = std::min(host.available_bytes, std::max<int64_t>(limit - used, 0));
  };
  const Cgroups cgroups = FindCgroups(root);
  for (const std::string& dir : cgroups.v2) bound(dir, "memory.max", "memory.current");
  for (const std::string& dir : cgroups.v1_memory) bound(dir, "memory.limit_in_bytes", "memory.usage_in_bytes");
  return host;
}

int64_t CgroupOomKills(const std::string& root) {
  const Cgroups cgroups = FindCgroups(root);
  int64_t sum = -1;
  const auto add = [&](int64_t count) {
    if (count >= 0) sum = std::max<int64_t>(sum, 0) + count;
  };
  for (const std::string& dir : cgroups.v2) add(KeyedNumberIn(dir + "/memory.events", "oom_kill"));
  for (const std::string& dir : cgroups.v1_memory) add(KeyedNumberIn(dir + "/memory.oom_control", "oom_kill"));
  return sum;
}

}  // namespace oomguard
