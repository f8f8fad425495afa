// Small file helpers every floor uses, with POSIX calls only.
//
//   std::string text, error;
//   if (!ReadFile(path, &text, &error)) { ... error: "PATH: cannot read: No such file or directory" ... }
//
// Note [No std::filesystem]: libtorch.so exports its own std::filesystem symbols, which the dynamic
// linker prefers to libstdc++'s; remove_all crashed through them. oomguard uses POSIX calls instead,
// here and wherever it walks folders.
#pragma once

#include <string>
#include <string_view>

namespace oomguard {

// The whole file. False, with one line naming PATH, when it cannot be opened or read ("PATH: cannot read:
// <strerror>"), is not a regular file ("PATH: not a regular file (a FIFO)"; a symbolic link is followed),
// or is larger than limits::kMaxInputFileBytes. Never blocks on a FIFO and never reads more than the limit.
[[nodiscard]] bool ReadFile(const std::string& path, std::string* content, std::string* error);

// Writes all of `content` to descriptor `fd` (retrying short writes and EINTR). False with errno set.
[[nodiscard]] bool WriteAll(int fd, std::string_view content);

// When `path` is a symbolic link: sets *next to what it points to (resolved against the link's folder when
// relative) and returns true. False when it is not a link, or cannot be read.
bool NextLinkHop(const std::string& path, std::string* next);

// True when nothing at all is at `path` (not even a dangling symbolic link): "no file yet", as opposed
// to a file that exists but cannot be read.
bool NothingAt(const std::string& path);

// "dir/name.json" -> "name"; a leading dot is part of the name (".hidden" stays).
std::string Stem(const std::string& path);

// Removes a folder that holds only plain files (a run's scratch folder), and the files in it.
void RemoveFolderOfFiles(const std::string& dir);

// Whether `pid_text` (the PID in a file's name) is a whole number naming another process that no
// longer exists: what a killed or crashed process left, safe to remove.
bool IsDeadProcess(const std::string& pid_text);

}  // namespace oomguard
