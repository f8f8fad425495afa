// Writes a file so that readers see the old content or the new, never a torn one: the data goes to a
// temporary file beside the target, is flushed to disk (fsync), renamed over the target, and the folder
// is flushed too. And checks, before a run, that a path can be written; and creates folders.
//
// Note [Output paths] (the policy; README "Output files" states it for users):
// - A symbolic link is written through: its final target gets the new content, the link stays.
// - A FIFO or a character device (/dev/stdout) is written directly, since it cannot be renamed over.
// - A folder, or anything else that is not a plain file, is an error; so is a path whose folder cannot be
//   created or written. Missing folders are created when the file is written.
// - The temporary file is ".NAME.tmp.PID" beside the target; one a killed writer left is removed by the
//   next write into that folder, once its PID is gone.
#pragma once

#include <string>
#include <string_view>

namespace oomguard {

// Returns false and fills *error ("cannot write FILE: reason") on failure; the target is untouched then.
[[nodiscard]] bool WriteFileAtomically(const std::string& path, std::string_view content, std::string* error);

// Whether WriteFileAtomically(path) can succeed, checked without writing anything: for a run's outputs,
// before the run. False with "PATH: <why>" (a folder; not a plain file; "cannot create folders in DIR:
// Permission denied"; "DIR is not a folder").
[[nodiscard]] bool CheckWritablePath(const std::string& path, std::string* error);

// The same for a folder files will be written into (--snapshot-dir, --baselines).
[[nodiscard]] bool CheckWritableFolder(const std::string& dir, std::string* error);

// Creates dir and any missing parents (mkdir -p); true when it exists as a folder afterwards. Returns
// false and fills *error ("cannot create DIR: reason") otherwise.
[[nodiscard]] bool MakeDirectories(const std::string& dir, std::string* error);

}  // namespace oomguard
