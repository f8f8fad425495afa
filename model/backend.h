// The backends oomguard measures on, as a closed set, and the plain facts about each that floors
// without LibTorch need (the verdicts, the runner's job count). The LibTorch side of a backend (its
// device, account and per-variant session) is backends/backend.h; JSON keeps the names ("cpu").
//
//   oomguard::Backend b;
//   if (!oomguard::Parse("meta", &b)) { ... not a backend ... }   // model/enum_names.h
//   oomguard::Name(b);                       // "meta"
//   oomguard::TraitsOf(b).has_data;          // false: gradients have no values to compare
//   oomguard::AllNames<oomguard::Backend>(); // {"cpu", "meta", "cuda"}: CLI choices, loader messages
//
// `--backend auto` is a request, not a backend: backends/backend.h resolves it (ResolveBackend).
// Adding a backend: an enumerator, its name and its row in kBackendTraits (same order), and
// backends/backend_registry.cpp's line.
#pragma once

#include <array>
#include <string_view>

#include "base/check.h"
#include "model/enum_names.h"

namespace oomguard {

enum class Backend { kCpu, kMeta, kCuda };

template <>
struct EnumNames<Backend> {
  static constexpr std::array<std::string_view, 3> kNames = {"cpu", "meta", "cuda"};
};

struct BackendTraits {
  Backend backend;
  // The device is shared by every process that uses it, so variants run one at a time (Note [One cuda
  // variant at a time], run/runner.cpp): a neighbour's memory would count against a variant's cap.
  bool shares_device;
  // Tensors hold values: gradients are digested and compared (meta has shapes only, so checks on
  // `grads` are skipped there).
  bool has_data;
  // The account books the cpu copies of wrapped numbers, which a GPU keeps on the host; the workload
  // leaves them out (Note [Host scalars], backends/host_scalars.h).
  bool books_host_scalars;
  // What the account books is this host's memory: a cap is memory really allocated (Note [cpu fits
  // allocate for real], cli/fit_command.cpp).
  bool allocates_host_memory;
  // PyTorch's caching allocator itself runs: its statistics are measured (m.cuda), not modelled
  // (--model-cuda is ignored), and an OOM reads as PyTorch's.
  bool has_caching_allocator;
  // The CUDA libraries' workspaces are taken outside the ledger before a variant (Note [Library
  // workspaces on cuda], allocators/cuda/cuda_warm_up.h).
  bool has_library_workspaces;
  // Variants may run in children forked from the runner, warm (Note [Warm children], run/runner.cpp):
  // nothing of the backend lives in the parent. cuda's children exec afresh: a CUDA context cannot
  // cross a fork, and asking whether a GPU is there already makes one in the parent.
  bool forks_warm;
  // A variant with `parallel.world` N > 1 runs N real ranks, a child each, joined by gloo on cpu (Note
  // [Real ranks on cpu], workload/parallel/rank_group.h) or NCCL on cuda (Note [Real ranks on cuda]);
  // elsewhere (meta) one rank is simulated on a FakeProcessGroup.
  bool real_ranks;
  // Each real rank takes a device of its own, rank r device r (cuda: cuda:r, NCCL's rule); a machine
  // with fewer devices than the world cannot run the ranks (run/rank_children.h RanksUnsupported).
  bool device_per_rank;
};

// One row per backend, in enum order (checked below).
inline constexpr std::array<BackendTraits, 3> kBackendTraits = {{
    // backend    shares has_data host_scalars host_memory caching workspaces forks_warm real_ranks device_per_rank
    {Backend::kCpu, false, true, true, true, false, false, true, true, false},
    {Backend::kMeta, false, false, false, false, false, false, true, false, false},
    {Backend::kCuda, true, true, false, false, true, true, false, true, true},
}};

static_assert([] {
  for (size_t i = 0; i < kBackendTraits.size(); ++i) {
    if (static_cast<size_t>(kBackendTraits[i].backend) != i) return false;
  }
  return kBackendTraits.size() == EnumNames<Backend>::kNames.size();
}());

constexpr const BackendTraits& TraitsOf(Backend backend) { return kBackendTraits[static_cast<size_t>(backend)]; }

// The traits of the backend named `name`, for data that carries a name (a measurement's backend);
// null when it names none.
inline const BackendTraits* FindBackendTraits(std::string_view name) {
  Backend backend;
  return Parse(name, &backend) ? &TraitsOf(backend) : nullptr;
}

// For tests and callers that hold a name the CLI or the loader already checked.
inline Backend BackendNamed(std::string_view name) {
  Backend backend = Backend::kCpu;
  OOMGUARD_CHECK(Parse(name, &backend)) << "not a backend: '" << name << "'";
  return backend;
}

}  // namespace oomguard
