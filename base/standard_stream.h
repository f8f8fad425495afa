// Whether a path names one of this process's open file descriptors (/dev/stdout, /dev/fd/N,
// /proc/self/fd/N, or a symbolic link that ends at one), and which.
//
// Note [Standard streams are written through their descriptor]: such a path is a door into a stream the
// process already holds (a pipe to `tee`, a CI log, a file the shell opened with `>` or `>>`). Following
// it to the file behind it and renaming a temporary over that file replaced everything the stream held;
// following it into a pipe found "pipe:[N]", no file at all. So a write to it goes through descriptor
// N itself: it lands where the stream is now, after what the process wrote to it, and truncates nothing.
// A fresh open() would not do: its offset would start at 0 (at the end with O_APPEND), and the stream's
// own later writes, at its own offset, would overwrite the report.
#pragma once

#include <string>
#include <string_view>

namespace oomguard {

// N for /dev/stdin, /dev/stdout, /dev/stderr (0, 1, 2), /dev/fd/N, /proc/self/fd/N,
// /proc/thread-self/fd/N and /proc/<this PID>/fd/N, also at the end of a chain of symbolic links; -1 for
// any other path. Whether N is open is not checked.
int StandardStreamDescriptor(const std::string& path);

// Whether descriptor `fd` is open for writing; false with "not open for writing" or strerror otherwise.
[[nodiscard]] bool DescriptorWritable(int fd, std::string* error);

// Writes `content` to descriptor `fd` at its own position, after flushing this process's buffered
// stdio and iostreams, so the content follows what they held. False with errno set on failure.
[[nodiscard]] bool WriteToDescriptor(int fd, std::string_view content);

}  // namespace oomguard
