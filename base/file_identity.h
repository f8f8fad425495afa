// Which file a path names, so that two spellings of one file compare equal: "x.md", "sub/../x.md", a
// symbolic link to it, a hard link. For refusing a run whose outputs collide with each other or with
// its inputs (D26), before anything is written.
#pragma once

#include <string>

namespace oomguard {

// A key equal for two paths exactly when a write to either lands in the same file: the device and inode
// of an existing file (links followed); for a file not there yet, the real path of its folder (as far as
// it exists) and its name. "" for a standard stream (base/standard_stream.h), a FIFO or a device
// (/dev/null): those are written into, never replaced, and may take any number of outputs.
std::string FileIdentity(const std::string& path);

}  // namespace oomguard
