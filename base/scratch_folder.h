// A run's scratch folder: where its children's measurements, stderr and variant files go, locked
// while the run lives so that no other run removes it.
//
//   std::string error;
//   oomguard::ScratchFolder scratch;
//   if (!scratch.Create("oomguard-run", &error)) { ... "cannot create a scratch folder in /tmp: ..." ... }
//   ... scratch.path() ...
//   scratch.Remove();  // also on destruction
//
// Note [Scratch folders are locked]
// A run removes the scratch folders that killed or crashed runs left (so none piles up). A folder's
// name holds its run's PID, but a PID says nothing across PID namespaces: a run in a container that
// shares TMPDIR found no process with a live run's PID and removed its folder under it. So a run holds
// an flock on its folder (the folder's own descriptor) for as long as it lives, and a folder is
// removed only while its lock can be taken (and its PID, as before, names no process here; that also
// keeps the folders of older oomguard versions, which lock nothing). flock works across PID namespaces
// on one file system, and the kernel drops the lock when the process dies, however it dies. The
// descriptor is O_CLOEXEC: a spawned child does not hold the lock; a forked one shares it (one open
// file description), so a child that outlives a killed runner keeps its folder until it ends.
// Error policy: failures return false with one line naming the folder tried and strerror.
#pragma once

#include <string>

namespace oomguard {

// $TMPDIR without a trailing '/', or "/tmp" when it is unset or empty. False with one line naming
// TMPDIR and why when it is set to something else than an absolute path to a folder (Note [TMPDIR is
// input]).
[[nodiscard]] bool TemporaryFolder(std::string* folder, std::string* error);

class ScratchFolder {
 public:
  ScratchFolder() = default;
  ~ScratchFolder() { Remove(); }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;

  // Creates "TMP/PREFIX-PID-XXXXXX" (TMP: TemporaryFolder()), locked, after removing the folders
  // PREFIX-* there whose lock is free and whose PID names no process. False with one line
  // ("cannot create a scratch folder in TMP: No space left on device").
  [[nodiscard]] bool Create(const std::string& prefix, std::string* error);

  const std::string& path() const { return path_; }

  // Removes the folder and what is in it, and lets the lock go. Safe to call twice.
  void Remove();

 private:
  std::string path_;
  int lock_fd_ = -1;
};

// Removes the folders TMP/PREFIX-* that no live run holds (Note [Scratch folders are locked]).
// ScratchFolder::Create calls it; exposed for tests.
void RemoveAbandonedScratchFolders(const std::string& root, const std::string& prefix);

}  // namespace oomguard
