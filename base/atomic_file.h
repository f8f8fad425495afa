// Writes a file so that readers see the old content or the new, never a torn one: the data goes to a
// temporary file beside the target, is flushed to disk (fsync), renamed over the target, and the folder
// is flushed too. And checks, before a run, that a path can be written; and creates folders.
//
// Note [Output paths] (the policy; README "Output files" states it for users):
// - A symbolic link is written through: its final target gets the new content, the link stays.
// - A FIFO or a character device is written directly, since it cannot be renamed over; so is a standard
//   stream (/dev/stdout, /proc/self/fd/N), through its descriptor (Note [Standard streams are written
//   through their descriptor], base/standard_stream.h), never renamed over the file behind it.
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

// Removes the ".NAME.tmp.PID" files in `dir` whose writer is gone (killed before its rename): those of
// NAME, or with an empty `name` of every file. A temporary of a live process is left alone.
void RemoveStaleTemporaries(const std::string& dir, const std::string& name = "");

// Note [Output paths]: where a write to a plain `path` lands. A chain of symbolic links is followed to its
// end, which may not exist yet (a dangling link names the file to create).
std::string WriteTarget(const std::string& path);

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
