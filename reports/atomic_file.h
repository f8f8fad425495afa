// Writes a file so that readers see the old content or the new, never a torn one: the data goes to a
// temporary file beside the target, is flushed to disk (fsync), and renamed over the target.
#pragma once

#include <string>
#include <string_view>

namespace oomguard {

// Returns false and fills *error ("cannot write FILE: reason") on failure; the target is untouched then.
[[nodiscard]] bool WriteFileAtomically(const std::string& path, std::string_view content, std::string* error);

}  // namespace oomguard
