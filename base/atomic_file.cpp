#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace oomguard {

bool WriteFileAtomically(const std::string& path, std::string_view content, std::string* error) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const bool ok = written == content.size() && fsync(fd) == 0;
  const int saved_errno = errno;
  close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "cannot write " + path + ": " + std::strerror(ok ? errno : saved_errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

bool MakeDirectories(const std::string& dir, std::string* error) {
  // Each prefix ending before a '/', then dir itself; an existing one is fine if it is a folder.
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    struct stat info;
    if (!prefix.empty() && mkdir(prefix.c_str(), 0755) != 0 &&
        !(errno == EEXIST && stat(prefix.c_str(), &info) == 0 && S_ISDIR(info.st_mode))) {
      *error = "cannot create " + dir + ": " + std::strerror(errno == EEXIST ? ENOTDIR : errno);
      return false;
    }
    if (slash == std::string::npos) return true;
  }
}

}  // namespace oomguard
