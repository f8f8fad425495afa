#include "scenario/catalog.h"

#include <cstdlib>

namespace oomguard {

std::string CatalogDirectory() {
  if (const char* env = std::getenv("OOMGUARD_CATALOG"); env && *env) return env;
  return OOMGUARD_CATALOG_DIR;
}

std::vector<std::string> PathsOrCatalog(const std::vector<std::string>& paths) {
  return paths.empty() ? std::vector<std::string>{CatalogDirectory()} : paths;
}

}  // namespace oomguard
