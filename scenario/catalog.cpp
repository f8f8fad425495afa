#include "scenario/catalog.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace oomguard {
namespace {

std::string& InstalledCatalog() {
  static std::string directory;
  return directory;
}

std::vector<std::string>& DefaultPaths() {
  static std::vector<std::string> paths;
  return paths;
}

bool IsFolder(const std::string& path) {
  struct stat info {};
  return !path.empty() && stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

// <dir of /proc/self/exe>/../share/oomguard/scenarios (Note [No std::filesystem], base/files.h).
std::string BesideExecutable() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return "";
  std::string exe(buffer, static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  if (slash == std::string::npos) return "";
  return exe.substr(0, slash) + "/../share/oomguard/scenarios";
}

}  // namespace

std::string CatalogDirectory() {
  if (const char* env = std::getenv("OOMGUARD_CATALOG"); env && *env) return env;
  if (const std::string installed = BesideExecutable(); IsFolder(installed)) return installed;
  if (IsFolder(InstalledCatalog())) return InstalledCatalog();
  return OOMGUARD_CATALOG_DIR;
}

void SetInstalledCatalog(const std::string& directory) { InstalledCatalog() = directory; }

void SetDefaultScenarioPaths(const std::vector<std::string>& paths) { DefaultPaths() = paths; }

std::vector<std::string> PathsOrCatalog(const std::vector<std::string>& paths) {
  if (paths.empty()) return DefaultPaths().empty() ? std::vector<std::string>{CatalogDirectory()} : DefaultPaths();
  std::vector<std::string> out;
  for (const std::string& path : paths) out.push_back(path == kCatalogAlias ? CatalogDirectory() : path);
  return out;
}

std::vector<std::string> NameSearchPaths(const std::vector<std::string>& paths) {
  std::vector<std::string> out = PathsOrCatalog(paths);
  if (paths.empty() && !DefaultPaths().empty()) out.push_back(CatalogDirectory());
  return out;
}

}  // namespace oomguard
