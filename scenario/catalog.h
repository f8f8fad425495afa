// Where scenario files come from when none are named: the executable's own scenario folders (a user's
// program sets them through oomguard::Main, oomguard/main.h), else the built-in catalog.
//
//   oomguard::SetDefaultScenarioPaths({"/src/my-project/scenarios"});  // once, before any command runs
//   PathsOrCatalog({});            // {"/src/my-project/scenarios"}
//   PathsOrCatalog({"@catalog"});  // {CatalogDirectory()}
#pragma once

#include <string>
#include <vector>

namespace oomguard {

// The spelling that names the built-in catalog on a command line: `oomguard run @catalog`.
inline constexpr const char* kCatalogAlias = "@catalog";

// The built-in catalog, first of: $OOMGUARD_CATALOG; the installed copy beside the executable
// (<prefix>/bin/../share/oomguard/scenarios); the folder set by SetInstalledCatalog (the
// package's location, compiled into a user's program by oomguard/main.h); the source tree's scenarios/.
std::string CatalogDirectory();

// Where an installed package keeps its catalog, when the executable is not inside that prefix;
// empty or missing folders are passed over.
void SetInstalledCatalog(const std::string& directory);

// What runs when no paths are given: these folders or files instead of the catalog. Not thread-safe:
// set once at start-up.
void SetDefaultScenarioPaths(const std::vector<std::string>& paths);

// `paths` as given on the command line (kCatalogAlias replaced by the catalog), or when none are, the
// default scenario paths, or when none are set, the catalog.
std::vector<std::string> PathsOrCatalog(const std::vector<std::string>& paths);

// For finding a scenario by name: PathsOrCatalog(paths), then the catalog after the defaults when
// no paths were given (so `explain forgotten-no-grad` works in a user's program too).
std::vector<std::string> NameSearchPaths(const std::vector<std::string>& paths);

}  // namespace oomguard
