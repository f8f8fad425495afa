// The `oomguard` tool: the command line over the built-in catalog.
#include "oomguard/main.h"

OOMGUARD_MAIN()
