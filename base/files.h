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

namespace oomguard {

// The whole file. False, with "PATH: cannot read: <strerror>", when it cannot be opened or read.
[[nodiscard]] bool ReadFile(const std::string& path, std::string* content, std::string* error);

// "dir/name.json" -> "name"; a leading dot is part of the name (".hidden" stays).
std::string Stem(const std::string& path);

// Removes a folder that holds only plain files (a run's scratch folder), and the files in it.
void RemoveFolderOfFiles(const std::string& dir);

}  // namespace oomguard
