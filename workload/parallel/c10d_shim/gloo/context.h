// Note [ProcessGroupGloo without gloo's headers]
// The torch wheel ships c10d's ProcessGroupGloo.hpp but not the gloo headers it includes; the gloo
// library itself is compiled into libtorch_cpu. ProcessGroupGloo.hpp holds gloo's types only behind
// pointers (shared_ptr<gloo::Context>, unique_ptr<gloo::transport::UnboundBuffer>, shared_ptr of the
// store and the devices), so its layout, the constructor oomguard calls and the virtual collectives
// do not depend on gloo's definitions. These stand-ins declare just what the header's inline code
// names (a Context with setTimeout, the rendezvous Store that its GlooStore overrides), none of which
// oomguard calls or instantiates: the real ones run inside libtorch_cpu. They come first on the
// include path of workload/parallel/rank_group.cpp alone (CMakeLists.txt).
#pragma once

#include <chrono>

namespace gloo {

class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);
};

}  // namespace gloo
