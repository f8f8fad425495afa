#include "base/files.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace oomguard {

bool ReadFile(const std::string& path, std::string* content, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  const int open_errno = errno;
  if (!in) {
    *error = path + ": cannot read: " + std::strerror(open_errno);
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();  // an empty file reads as ""
  if (in.bad()) {
    *error = path + ": cannot read: " + std::strerror(errno);
    return false;
  }
  *content = text.str();
  return true;
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

}  // namespace oomguard
