// Files a test writes under /tmp and reads back: a path of its own, the text, and what a killed atomic
// writer (base/atomic_file.h) may leave beside it.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace oomguard::testing {

// /tmp/oomguard-test-PIDname: this process's, so that tests running at once do not meet.
inline std::string TempPath(const std::string& name) { return "/tmp/oomguard-test-" + std::to_string(getpid()) + name; }

inline std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The temporary files WriteFileAtomically may have left beside `path`.
inline std::vector<std::string> TemporariesBeside(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = path.substr(0, slash), prefix = "." + path.substr(slash + 1) + ".tmp.";
  std::vector<std::string> found;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* entry = readdir(d)) {
      if (std::string(entry->d_name).rfind(prefix, 0) == 0) found.push_back(entry->d_name);
    }
    closedir(d);
  }
  return found;
}

}  // namespace oomguard::testing
