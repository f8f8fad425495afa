#include "base/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/files.h"
#include "base/standard_stream.h"

namespace oomguard {
namespace {

std::string FolderOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string NameOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool SyncFolder(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = fsync(fd) == 0;
  close(fd);
  return ok;
}

// The nearest folder at or above `dir` that exists; "" when a component is not a folder (*blocker).
std::string ExistingAncestor(const std::string& dir, std::string* blocker) {
  std::string at = dir;
  while (true) {
    struct stat info {};
    if (stat(at.c_str(), &info) == 0) {
      if (S_ISDIR(info.st_mode)) return at;
      *blocker = at;
      return "";
    }
    if (at == "/" || at == ".") return at;
    at = FolderOf(at);
  }
}

}  // namespace

std::string WriteTarget(const std::string& path) {
  std::string target = path;
  for (int hops = 0; hops < 40 && NextLinkHop(target, &target); ++hops) {
  }
  return target;  // after 40 hops, a loop: the write fails with ELOOP and says so
}

bool WriteFileAtomically(const std::string& path, std::string_view content, std::string* error) {
  // Note [Standard streams are written through their descriptor]: never renamed over.
  if (const int fd = StandardStreamDescriptor(path); fd >= 0) {
    if (WriteToDescriptor(fd, content)) return true;
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  const std::string target = WriteTarget(path);
  struct stat info {};
  if (stat(target.c_str(), &info) == 0 && (S_ISFIFO(info.st_mode) || S_ISCHR(info.st_mode))) {
    const int fd = open(target.c_str(), O_WRONLY | O_CLOEXEC);
    const bool ok = fd >= 0 && WriteAll(fd, content);
    const int saved_errno = errno;
    if (fd >= 0) close(fd);
    if (!ok) *error = "cannot write " + path + ": " + std::strerror(saved_errno);
    return ok;
  }
  const std::string dir = FolderOf(target), name = NameOf(target);
  if (!MakeDirectories(dir, error)) return false;
  const std::string tmp = dir + "/." + name + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  const bool ok = WriteAll(fd, content) && fsync(fd) == 0;
  const int saved_errno = errno;
  close(fd);
  if (!ok || std::rename(tmp.c_str(), target.c_str()) != 0) {
    *error = "cannot write " + path + ": " + std::strerror(ok ? errno : saved_errno);
    std::remove(tmp.c_str());
    return false;
  }
  SyncFolder(dir);  // the rename itself reaches the disk
  RemoveStaleTemporaries(dir, name);
  return true;
}

void RemoveStaleTemporaries(const std::string& dir, const std::string& name) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* entry = readdir(d)) {
    const std::string file = entry->d_name;
    const size_t tmp = file.rfind(".tmp.");
    if (file[0] != '.' || tmp == std::string::npos || tmp < 1) continue;
    if (!name.empty() && file.compare(1, tmp - 1, name) != 0) continue;
    if (IsDeadProcess(file.substr(tmp + 5))) unlink((dir + "/" + file).c_str());
  }
  closedir(d);
}

bool CheckWritablePath(const std::string& path, std::string* error) {
  if (path.empty()) {
    *error = "an empty path";
    return false;
  }
  if (const int fd = StandardStreamDescriptor(path); fd >= 0) {
    if (DescriptorWritable(fd, error)) return true;
    *error = path + ": " + *error;
    return false;
  }
  const std::string target = WriteTarget(path);
  struct stat info {};
  if (stat(target.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) {
      *error = path + ": is a folder; expected a file name";
      return false;
    }
    if (S_ISFIFO(info.st_mode) || S_ISCHR(info.st_mode)) return true;
    if (!S_ISREG(info.st_mode)) {
      *error = path + ": not a plain file";
      return false;
    }
  } else if (errno == ELOOP) {
    *error = path + ": " + std::strerror(ELOOP);
    return false;
  }
  if (!CheckWritableFolder(FolderOf(target), error)) {
    *error = path + ": " + *error;
    return false;
  }
  return true;
}

bool CheckWritableFolder(const std::string& dir, std::string* error) {
  std::string blocker;
  const std::string existing = ExistingAncestor(dir, &blocker);
  if (existing.empty()) {
    *error = blocker + " is not a folder";
    return false;
  }
  if (access(existing.c_str(), W_OK | X_OK) != 0) {
    *error =
        (existing == dir ? "cannot write in " : "cannot create folders in ") + existing + ": " + std::strerror(errno);
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
