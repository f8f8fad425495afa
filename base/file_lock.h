// An exclusive lock on a file (flock), held for a scope: for read-modify-write updates that several
// processes may make at once, such as two `--update-baselines` runs writing one baselines folder.
//
//   FileLock lock;
//   if (!lock.Acquire(dir + "/.lock", &error)) { ... "cannot lock DIR/.lock: reason" ... }
//   ... load, merge, write ...
//   // released when `lock` goes out of scope (or its process dies)
//
// The lock file is created empty and left in place: removing it would let a waiter lock a file another
// process has already replaced. flock belongs to the open file, so two FileLocks exclude each other
// in one process too (threads), not only across processes.
#pragma once

#include <string>

namespace oomguard {

class FileLock {
 public:
  FileLock() = default;
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Waits until this process holds the lock on `path` (creating the file). False with "cannot lock
  // PATH: reason" when the file cannot be opened or locked.
  [[nodiscard]] bool Acquire(const std::string& path, std::string* error);

 private:
  int fd_ = -1;
};

}  // namespace oomguard
