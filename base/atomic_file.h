// Writes a file so that readers see the old content or the new, never a torn one: the data goes to a
// temporary file beside the target, is flushed to disk (fsync), and renamed over the target. And
// creates the folders such files go into.
#pragma once

#include <string>
#include <string_view>

namespace oomguard {

// Returns false and fills *error ("cannot write FILE: reason") on failure; the target is untouched then.
[[nodiscard]] bool WriteFileAtomically(const std::string& path, std::string_view content, std::string* error);

// Creates dir and any missing parents (mkdir -p); true when it exists as a folder afterwards. Returns
// false and fills *error ("cannot create DIR: reason") otherwise.
[[nodiscard]] bool MakeDirectories(const std::string& dir, std::string* error);

}  // namespace oomguard
