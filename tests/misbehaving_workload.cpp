// A user's program (oomguard::Main) with one workload that fails as user code can: it segfaults,
// aborts, hangs, is killed from outside (as the kernel's OOM killer kills), throws, or keeps state in a
// static. tests/warm_children_test.cpp runs it with forked and with spawned children and expects the
// same report from both (Note [Warm children], run/runner.cpp).
#include <oomguard/main.h>
#include <oomguard/workload.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace {

// State a variant would leave for the next if they shared a process: each call adds 1 MiB that stays.
std::vector<at::Tensor>& Kept() {
  static std::vector<at::Tensor> kept;
  return kept;
}

}  // namespace

OOMGUARD_WORKLOAD(misbehaves) {
  const std::string how = ctx.String("how");
  for (int64_t iteration : ctx.Iterations()) {
    (void)iteration;
    auto phase = ctx.Phase("forward");
    Kept().push_back(at::ones({static_cast<int64_t>(Kept().size() + 1), 1024, 256}, ctx.options()));
    if (how == "segfault") std::raise(SIGSEGV);
    if (how == "abort") std::abort();
    if (how == "killed") std::raise(SIGKILL);
    if (how == "throws") throw std::runtime_error("the user's code threw");
    if (how == "hang") {
      for (;;) pause();
    }
  }
}

OOMGUARD_MAIN()
