#include "base/standard_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "base/files.h"

namespace oomguard {
namespace {

// N when `text` is a whole non-negative number that fits an int; -1 otherwise.
int DescriptorNumber(const std::string& text) {
  if (text.empty() || text.size() > 9) return -1;
  for (const char c : text) {
    if (c < '0' || c > '9') return -1;
  }
  return std::stoi(text);
}

// The descriptor one path names by its spelling alone.
int NamedDescriptor(const std::string& path) {
  if (path == "/dev/stdin") return 0;
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  const std::string self_pid = "/proc/" + std::to_string(getpid()) + "/fd/";
  for (const std::string& prefix :
       {std::string("/dev/fd/"), std::string("/proc/self/fd/"), std::string("/proc/thread-self/fd/"), self_pid}) {
    if (path.rfind(prefix, 0) == 0) return DescriptorNumber(path.substr(prefix.size()));
  }
  return -1;
}

}  // namespace

int StandardStreamDescriptor(const std::string& path) {
  std::string at = path;
  for (int hops = 0; hops < 40; ++hops) {
    if (const int fd = NamedDescriptor(at); fd >= 0) return fd;
    if (!NextLinkHop(at, &at)) return -1;
  }
  return -1;
}

bool DescriptorWritable(int fd, std::string* error) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0) {
    *error = std::strerror(errno);
    return false;
  }
  if ((flags & O_ACCMODE) == O_RDONLY) {
    *error = "not open for writing";
    return false;
  }
  return true;
}

bool WriteToDescriptor(int fd, std::string_view content) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  return WriteAll(fd, content);
}

}  // namespace oomguard
