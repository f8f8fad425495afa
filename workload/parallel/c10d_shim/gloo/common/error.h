// Note [ProcessGroupGloo without gloo's headers] (workload/parallel/c10d_shim/gloo/context.h): nothing of this
// header is used by ProcessGroupGloo.hpp's declarations.
#pragma once
