// A user's memory-check program: oomguard's command line over the consumer's scenarios/ folder
// (when no paths are given the built-in catalog), as a program linked with oomguard::oomguard has it.
#include <oomguard/main.h>

OOMGUARD_MAIN()
