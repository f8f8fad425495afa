#include "base/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/byte_size.h"
#include "base/input_limits.h"

namespace oomguard {

namespace {

std::string KindOfFile(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

}  // namespace

bool WriteAll(int fd, std::string_view content) {
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

bool NextLinkHop(const std::string& path, std::string* next) {
  struct stat info {};
  if (lstat(path.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) return false;
  char link[PATH_MAX];
  const ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
  if (n < 0) return false;
  link[n] = '\0';
  const size_t slash = path.find_last_of('/');
  *next = link[0] == '/' || slash == std::string::npos ? std::string(link)
                                                       : (slash == 0 ? "/" : path.substr(0, slash + 1)) + link;
  return true;
}

bool ReadFile(const std::string& path, std::string* content, std::string* error) {
  // O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever; fstat refuses it next.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *error = path + ": cannot read: " + std::strerror(errno);
    return false;
  }
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    *error = path + ": not a regular file (" + KindOfFile(info.st_mode) + ")";
    close(fd);
    return false;
  }
  const std::string limit = "the limit for input files is " + FormatBytes(limits::kMaxInputFileBytes);
  if (info.st_size > limits::kMaxInputFileBytes) {
    *error = path + ": too large (" + FormatBytes(info.st_size) + "; " + limit + ")";
    close(fd);
    return false;
  }
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = path + ": cannot read: " + std::strerror(errno);
      close(fd);
      return false;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > limits::kMaxInputFileBytes) {  // a file that grew while read
      *error = path + ": too large (more than " + FormatBytes(limits::kMaxInputFileBytes) + "; " + limit + ")";
      close(fd);
      return false;
    }
  }
  close(fd);
  *content = std::move(text);  // an empty file reads as ""
  return true;
}

bool NothingAt(const std::string& path) {
  struct stat info {};
  return lstat(path.c_str(), &info) != 0 && errno == ENOENT;
}

std::string Stem(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = name.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
}

void RemoveFolderOfFiles(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") unlink((dir + "/" + name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

bool IsDeadProcess(const std::string& pid_text) {
  if (pid_text.empty() || pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
  return pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace oomguard
