// The name a command's messages start with: the program the user ran ("oomguard", or their own
// binary built with oomguard::Main, "memory_checks"), so that "memory_checks run: no scenario files"
// names what they typed. RunCli sets it from argv[0]; "oomguard" until then.
#pragma once

#include <string>
#include <string_view>

namespace oomguard {

// argv[0]'s last path component; an empty one leaves the name as it was.
void SetProgramName(std::string_view argv0);
const std::string& ProgramName();

// "<program> <command>: ", the prefix of a command's error lines.
std::string CommandPrefix(std::string_view command);

}  // namespace oomguard
