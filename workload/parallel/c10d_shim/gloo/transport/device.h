// Note [ProcessGroupGloo without gloo's headers] (workload/parallel/c10d_shim/gloo/context.h): gloo's devices
// and buffers are only held through pointers by ProcessGroupGloo.hpp.
#pragma once

namespace gloo::transport {

class Device;
class UnboundBuffer;

}  // namespace gloo::transport
