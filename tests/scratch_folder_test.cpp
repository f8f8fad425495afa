// Scratch folders of runs (base/scratch_folder.h): a run removes what dead runs left, and never the
// folder of a live one, wherever that run's PID lives.
#include "base/scratch_folder.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "tests/scoped_environment.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

// A PID above any pid_max (2^22): no process here has it, as a live run in another PID namespace has
// none here.
constexpr const char* kPidNotHere = "99999999";

bool IsFolder(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A run's folder as another process would hold it: its own open file description, locked.
int LockFolder(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0) << path;
  return fd;
}

// D24 (issue 35): a run in another PID namespace sharing TMPDIR removed a live run's scratch folder,
// whose PID it could not see; the live run's variants then ended "exit code 2" and "exit code 127".
// A folder is removed only while its lock is free (Note [Scratch folders are locked]).
TEST(ScratchFolder, AFolderALiveRunHoldsStaysAndAnAbandonedOneGoes) {
  testing::ScratchFolder tmp("scratch");
  const std::string live = tmp.path() + "/oomguard-run-" + kPidNotHere + "-live00";
  const std::string abandoned = tmp.path() + "/oomguard-run-" + kPidNotHere + "-dead00";
  ASSERT_EQ(mkdir(live.c_str(), 0700), 0);
  ASSERT_EQ(mkdir(abandoned.c_str(), 0700), 0);
  tmp.Write("oomguard-run-" + std::string(kPidNotHere) + "-live00/0.json", "{}");
  tmp.Write("oomguard-run-" + std::string(kPidNotHere) + "-dead00/0.json", "{}");
  const int held = LockFolder(live);
  RemoveAbandonedScratchFolders(tmp.path(), "oomguard-run");
  EXPECT_TRUE(IsFolder(live));
  EXPECT_EQ(access((live + "/0.json").c_str(), F_OK), 0);
  EXPECT_FALSE(IsFolder(abandoned));
  close(held);  // the run ends (or dies): its lock goes with it
  RemoveAbandonedScratchFolders(tmp.path(), "oomguard-run");
  EXPECT_FALSE(IsFolder(live));
}

// The lock is taken by Create and held until Remove: another run (here, another open file description)
// cannot take it, so cannot remove the folder.
TEST(ScratchFolder, ARunHoldsTheLockOfItsFolderUntilItRemovesIt) {
  testing::ScratchFolder tmp("scratch");
  testing::ScopedEnvironment env({"TMPDIR"});
  env.Set("TMPDIR", tmp.path());
  ScratchFolder scratch;
  std::string error;
  ASSERT_TRUE(scratch.Create("oomguard-run", &error)) << error;
  const std::string path = scratch.path();
  const int other = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(other, 0);
  EXPECT_EQ(flock(other, LOCK_EX | LOCK_NB), -1);
  EXPECT_EQ(errno, EWOULDBLOCK);
  close(other);
  scratch.Remove();
  EXPECT_FALSE(IsFolder(path));
}

}  // namespace
}  // namespace oomguard
