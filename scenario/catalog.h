// Where scenario files come from when none are named: the built-in catalog.
#pragma once

#include <string>
#include <vector>

namespace oomguard {

// The built-in catalog: $OOMGUARD_CATALOG, else the source tree's scenarios/ folder.
std::string CatalogDirectory();

// `paths` as given on the command line, or the catalog when none are.
std::vector<std::string> PathsOrCatalog(const std::vector<std::string>& paths);

}  // namespace oomguard
