// A scope whose first CPU allocation is host memory (Note [Host memory on the cpu backend],
// allocators/cpu_tracking_allocator.h), for an op that wraps a number in a 0-dim cpu tensor and then
// allocates its result itself, with no nested op between them (a comparison with a number: Note [Host
// scalars], backends/host_scalars.h).
//
//   { oomguard::HostFirstAllocationScope scope; ... }  // the next allocation on this thread is host memory
//
// Later allocations in the scope are the device's again. Thread-local; scopes nest (the inner one
// restores the outer one's state). Defined in cpu_tracking_allocator.cpp, which consults it.
#pragma once

namespace oomguard {

class HostFirstAllocationScope {
 public:
  HostFirstAllocationScope();
  ~HostFirstAllocationScope();
  HostFirstAllocationScope(const HostFirstAllocationScope&) = delete;
  HostFirstAllocationScope& operator=(const HostFirstAllocationScope&) = delete;

 private:
  bool previous_;
};

}  // namespace oomguard
