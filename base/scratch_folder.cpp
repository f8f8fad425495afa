#include "base/scratch_folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/files.h"

namespace oomguard {
namespace {

// The folder at `path` opened for its lock, or -1.
int OpenFolder(const std::string& path) {
  return open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

}  // namespace

// Note [TMPDIR is input]
// TMPDIR set to a relative path, a missing folder or a file used to fall back to /tmp silently, so a
// run wrote where its user had said not to. It is the user's setting, read like a flag: an error (exit
// 2) naming TMPDIR and what is wrong with it. Unset or empty means /tmp, as for every POSIX tool.
bool TemporaryFolder(std::string* folder, std::string* error) {
  const char* tmpdir = std::getenv("TMPDIR");
  if (tmpdir == nullptr || tmpdir[0] == '\0') {
    *folder = "/tmp";
    return true;
  }
  const std::string value = tmpdir;
  const std::string named = "TMPDIR=" + value + ": ";
  if (value[0] != '/') {
    *error = named + "not an absolute path";
    return false;
  }
  struct stat st {};
  if (stat(tmpdir, &st) != 0) {
    *error = named + std::strerror(errno);
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *error = named + "not a folder";
    return false;
  }
  *folder = value;
  while (folder->size() > 1 && folder->back() == '/') folder->pop_back();
  return true;
}

void RemoveAbandonedScratchFolders(const std::string& root, const std::string& prefix) {
  const std::string start = prefix + "-";
  DIR* tmp = opendir(root.c_str());
  if (tmp == nullptr) return;
  while (const dirent* entry = readdir(tmp)) {
    const std::string name = entry->d_name;
    if (name.rfind(start, 0) != 0) continue;
    const size_t dash = name.find('-', start.size());
    const std::string pid_text = name.substr(start.size(), dash == std::string::npos ? 0 : dash - start.size());
    if (!IsDeadProcess(pid_text)) continue;
    const std::string path = root + "/" + name;
    const int fd = OpenFolder(path);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) RemoveFolderOfFiles(path);  // held until close: see Create
    close(fd);
  }
  closedir(tmp);
}

bool ScratchFolder::Create(const std::string& prefix, std::string* error) {
  Remove();
  std::string root;
  if (!TemporaryFolder(&root, error)) return false;
  RemoveAbandonedScratchFolders(root, prefix);
  // A run that cleans up between our mkdtemp and our flock may take the lock and remove the new,
  // empty folder; its descriptor then has no link left, and we make another.
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string dir = root + "/" + prefix + "-" + std::to_string(getpid()) + "-XXXXXX";
    if (mkdtemp(dir.data()) == nullptr) {
      *error = "cannot create a scratch folder in " + root + ": " + std::strerror(errno);
      return false;
    }
    const int fd = OpenFolder(dir);
    struct stat st {};
    if (fd < 0 || flock(fd, LOCK_EX) != 0 || fstat(fd, &st) != 0) {
      *error = "cannot lock the scratch folder " + dir + ": " + std::strerror(errno);
      if (fd >= 0) close(fd);
      rmdir(dir.c_str());
      return false;
    }
    if (st.st_nlink == 0) {
      close(fd);
      continue;
    }
    path_ = dir;
    lock_fd_ = fd;
    return true;
  }
  *error = "cannot create a scratch folder in " + root + ": other runs removed every one made";
  return false;
}

void ScratchFolder::Remove() {
  if (!path_.empty()) RemoveFolderOfFiles(path_);
  if (lock_fd_ >= 0) close(lock_fd_);
  path_.clear();
  lock_fd_ = -1;
}

}  // namespace oomguard
