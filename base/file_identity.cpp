#include "base/file_identity.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <vector>

#include "base/atomic_file.h"
#include "base/standard_stream.h"

namespace oomguard {
namespace {

// `path` with its existing leading folders replaced by their real path and the rest kept by name, "."
// and ".." folded: a folder the write would create yet has no real path.
std::string RealPathAsFarAsItExists(const std::string& path) {
  std::vector<std::string> missing;  // trailing names, innermost first
  std::string at = path;
  char real[PATH_MAX];
  while (realpath(at.c_str(), real) == nullptr) {
    const size_t slash = at.find_last_of('/');
    missing.push_back(slash == std::string::npos ? at : at.substr(slash + 1));
    if (slash == std::string::npos) {
      at = ".";
    } else {
      at = slash == 0 ? "/" : at.substr(0, slash);
    }
    if (at == "/" || at == ".") {
      if (realpath(at.c_str(), real) == nullptr) return path;
      break;
    }
  }
  std::string result = real;
  for (auto name = missing.rbegin(); name != missing.rend(); ++name) {
    if (name->empty() || *name == ".") continue;
    if (*name == "..") {
      const size_t slash = result.find_last_of('/');
      result = slash == 0 ? "/" : result.substr(0, slash);
      continue;
    }
    result += (result == "/" ? "" : "/") + *name;
  }
  return result;
}

}  // namespace

std::string FileIdentity(const std::string& path) {
  if (StandardStreamDescriptor(path) >= 0) return "";
  // "sub/../x.md" with no sub/ yet names x.md all the same: the write creates sub/ first.
  const std::string target = WriteTarget(path);
  struct stat info {};
  const std::string resolved = stat(target.c_str(), &info) == 0 ? target : RealPathAsFarAsItExists(target);
  if (stat(resolved.c_str(), &info) != 0) return "path " + resolved;
  if (!S_ISREG(info.st_mode)) return "";  // a FIFO or a device: written into, never replaced
  return "inode " + std::to_string(info.st_dev) + ":" + std::to_string(info.st_ino);
}

}  // namespace oomguard
