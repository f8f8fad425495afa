#include "base/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace oomguard {

FileLock::~FileLock() {
  if (fd_ >= 0) close(fd_);  // closing the file releases the lock
}

bool FileLock::Acquire(const std::string& path, std::string* error) {
  if (fd_ >= 0) return true;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  int result = fd < 0 ? -1 : 0;
  while (fd >= 0 && (result = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
  }
  if (result != 0) {
    *error = "cannot lock " + path + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return false;
  }
  fd_ = fd;
  return true;
}

}  // namespace oomguard
