// A folder under /tmp for one test's files, removed with everything in it when the test ends.
//
//   testing::ScratchFolder folder("runner");
//   const std::string scenario = folder.Write("tiny.json", kTinyScenario);
//
// POSIX calls, not std::filesystem: see Note [No std::filesystem] in base/files.h.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace oomguard::testing {

class ScratchFolder {
 public:
  explicit ScratchFolder(const std::string& label) {
    std::string name = "/tmp/oomguard-" + label + "-test-XXXXXX";
    if (mkdtemp(name.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << name;
    path_ = name;
  }
  ~ScratchFolder() { Remove(path_); }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;

  const std::string& path() const { return path_; }

  // Writes `content` to NAME inside the folder and returns its path.
  std::string Write(const std::string& name, const std::string& content, bool executable = false) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file) << content;
    if (executable) chmod(file.c_str(), 0755);
    return file;
  }

 private:
  static void Remove(const std::string& path) {
    if (DIR* dir = opendir(path.c_str())) {
      while (const dirent* entry = readdir(dir)) {
        const std::string name = entry->d_name;
        if (name != "." && name != "..") Remove(path + "/" + name);
      }
      closedir(dir);
      rmdir(path.c_str());
    } else {
      unlink(path.c_str());
    }
  }

  std::string path_;
};

}  // namespace oomguard::testing
