// Atomic writes (base/atomic_file.h): whole files under SIGKILL, through links, and paths checked
// before a run writes anything.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/atomic_file.h"
#include "tests/written_files.h"

namespace oomguard {
namespace {

using testing::Read;
using testing::TemporariesBeside;
using testing::TempPath;

// A writer killed at any moment leaves the old content or the new one, never a mix.
TEST(AtomicFile, AKilledWriterNeverLeavesATornFile) {
  const std::string path = TempPath("atomic.json");
  const std::string a(4 << 20, 'a'), b(4 << 20, 'b');
  std::string error;
  ASSERT_TRUE(WriteFileAtomically(path, a, &error)) << error;
  for (int round = 0; round < 5; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      std::string e;
      for (int i = 0;; ++i) (void)WriteFileAtomically(path, i % 2 ? a : b, &e);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + 15 * round));
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    const std::string now = Read(path);
    EXPECT_TRUE(now == a || now == b) << "torn file of " << now.size() << " bytes in round " << round;
  }
  // D14: a killed writer's temporary file may stay; the next write into the folder removes it.
  ASSERT_TRUE(WriteFileAtomically(path, a, &error)) << error;
  EXPECT_EQ(TemporariesBeside(path), std::vector<std::string>{});
  unlink(path.c_str());
}

// D16: a report path that is a symbolic link is written through, the link kept.
TEST(AtomicFile, WritesThroughASymbolicLinkAndDirectlyToADevice) {
  const std::string target = TempPath("target.md"), link = TempPath("link.md");
  std::string error;
  ASSERT_TRUE(WriteFileAtomically(target, "old", &error)) << error;
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(link, "new", &error)) << error;
  struct stat info {};
  ASSERT_EQ(lstat(link.c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  EXPECT_EQ(Read(target), "new");
  EXPECT_TRUE(WriteFileAtomically("/dev/null", "anything", &error)) << error;
  unlink(link.c_str());
  unlink(target.c_str());
}

// D9: output paths are checked before a run, without writing anything.
TEST(AtomicFile, ChecksAPathBeforeAnythingIsWritten) {
  std::string error;
  EXPECT_TRUE(CheckWritablePath(TempPath("fresh.xml"), &error)) << error;
  EXPECT_TRUE(CheckWritablePath("/tmp/" + std::to_string(getpid()) + "-new/sub/x.xml", &error)) << error;
  EXPECT_TRUE(CheckWritablePath("/dev/stdout", &error)) << error;
  EXPECT_FALSE(CheckWritablePath("/tmp", &error));
  EXPECT_EQ(error, "/tmp: is a folder; expected a file name");
  EXPECT_FALSE(CheckWritablePath("/etc/hostname/x.xml", &error));
  EXPECT_EQ(error, "/etc/hostname/x.xml: /etc/hostname is not a folder");
  const std::string loop = TempPath("loop.xml");
  ASSERT_EQ(symlink(loop.c_str(), loop.c_str()), 0);
  EXPECT_FALSE(CheckWritablePath(loop, &error));
  EXPECT_EQ(error, loop + ": Too many levels of symbolic links");
  unlink(loop.c_str());
  EXPECT_FALSE(CheckWritablePath("", &error));
  EXPECT_EQ(error, "an empty path");
}

}  // namespace
}  // namespace oomguard
