// Which process group a rank's collectives go to: the one place that decides (Note [Real ranks on
// cpu], Note [Real ranks on cuda]). workload/parallel/data_parallel.cpp asks it for the group its
// Reducer and ZeRO collectives use.
//
//   // in a rank's child (run/measure_child.cpp), before it measures:
//   JoinRealRanks({store_path, /*world=*/4, /*rank=*/1, std::chrono::seconds(30)});
//   // in the workload:
//   c10::intrusive_ptr<c10d::Backend> group = MakeRankGroup(spec.parallel, c10::kCPU);
//
// Note [Real ranks on cpu]
// On --backend cpu a variant with world N > 1 runs N real ranks: the runner starts N children at once
// (run/rank_children.h), each with its own cap and ledger, and each joins the others here:
// c10d::ProcessGroupGloo over a c10d::FileStore in the run's scratch folder, on gloo's TCP transport
// bound to 127.0.0.1. Collectives move real numbers between real processes. Everywhere else (meta,
// and a process that joined nothing: fit, oomguard.measure, a test measuring in its own process) a
// rank is simulated alone with c10d::FakeProcessGroup, as rank `parallel.rank` of `world` (Note [One
// simulated rank], workload/parallel/data_parallel.h). Each group made in a rank's process is a fresh
// ProcessGroupGloo under a prefix of its own ("group-K", K counting from 0): every rank makes its
// groups in the same order (a variant run, then each measured fix's run), so the K-th group of each
// rank meets the others' K-th. Gloo's timeout is the join's: short, so that a rank never waits in a
// collective long for a sibling that is gone (the runner ends the siblings of a failed rank after a 2 s grace;
// the timeout is what is left should the runner be gone too).
// What Gloo allocates for itself inside a collective (an all-gather's flat staging) is host memory,
// out of the ledger (Note [Gloo's buffers are host memory], rank_group.cpp), so a rank's ledger books
// exactly what the fake group's rank books (RealRanks.EveryParallelCatalogVariant..., which compares
// both to the byte for every strategy at world 2 and 4).
//
// Note [Real ranks on cuda]
// On --backend cuda the same N children (spawned afresh, not forked: CUDA cannot cross a fork) join the
// same way, but each runs on a GPU of its own, rank r on cuda:r, with its own cap and caching allocator
// (Note [Ranks need a GPU each], run/rank_children.h), and the group is c10d's ProcessGroupNCCL over the
// same FileStore, one per group made, under the same prefixes: NCCL's, whole, from LibTorch's CUDA
// library loaded on demand (Note [ProcessGroupNCCL by name], allocators/cuda/nccl_group.h). Its
// collectives are completed on the host before they return (Note [NCCL collectives complete on the
// host], rank_group.cpp). What NCCL allocates for itself (its communicator's buffers, by cudaMalloc) is
// not the caching allocator's and stays out of the ledger, as the CUDA libraries' workspaces do.
// Error policy: a group that cannot be made (the store, the connection) throws c10::Error, which
// ends the rank's measurement with an error outcome.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "model/scenario.h"

namespace c10d {
class Backend;
}

namespace oomguard {

struct RealRanks {
  std::string store_path;  // a FileStore's file, in the run's scratch folder, shared by the N ranks
  int64_t world = 1;
  int64_t rank = 0;
  std::chrono::milliseconds timeout{30000};  // the store's and the group's (gloo's, NCCL's watchdog)
};

// This process is rank `ranks.rank` of `ranks.world` real ranks, from now on.
void JoinRealRanks(const RealRanks& ranks);

// The ranks this process joined, or null.
const RealRanks* JoinedRealRanks();

// The group for one rank of `spec`: when this process joined real ranks (spec's world and rank must be
// the join's), gloo for tensors on cpu and NCCL for tensors on cuda; else a FakeProcessGroup as rank
// spec.rank of spec.world.
c10::intrusive_ptr<c10d::Backend> MakeRankGroup(const ParallelSpec& spec, c10::DeviceType device);

}  // namespace oomguard
