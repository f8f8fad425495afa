// Fault injection: make chosen allocations fail, reproducibly, to rehearse out-of-memory handling.
//
//   auto policy = oomguard::AllOf({oomguard::InPhase("backward"), oomguard::NthAllocation(3)});
//   auto injector = std::make_shared<oomguard::FaultInjector>(std::move(policy));
//   // ... install with ScopedLimits (device_account.h); the 3rd allocation made in "backward" fails.
//   injector->failures();  // what was injected: allocation index, size, phase
//
// Policies are composable predicates over an allocation request. Stateful ones (NthAllocation,
// WithProbability) advance only on the requests that reach them: AllOf evaluates in order and stops at
// the first "no", so AllOf({InPhase("backward"), NthAllocation(3)}) is "the 3rd allocation *in
// backward*". With a deterministic allocation sequence every policy is reproducible, the random one
// included (its generator is seeded).
//
// Spec strings (the CLI's --inject), one policy per string, clauses joined by ',' meaning "all of":
//   nth=N          the Nth request that the filters (phase, min-size) let through (1-based)
//   min-size=SIZE  requests of at least SIZE bytes (byte_size.h syntax)
//   p=P[,seed=S]   each request with probability P (seed S, default 0)
//   phase=NAME     requests made while the ledger's phase is NAME
// e.g. "phase=backward,nth=2", "min-size=64MiB", "p=0.01,seed=7".
//
// Thread safety: FaultInjector::Check may be called concurrently; it serialises evaluation.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomguard {

struct AllocationRequest {
  int64_t index;  // 1-based count of requests the injector has seen
  int64_t bytes;
  std::string_view phase;
};

class FaultPolicy {
 public:
  virtual ~FaultPolicy() = default;
  virtual bool ShouldFail(const AllocationRequest& request) = 0;
  virtual std::string Describe() const = 0;
};

std::unique_ptr<FaultPolicy> NthAllocation(int64_t n);
std::unique_ptr<FaultPolicy> MinimumSize(int64_t bytes);
std::unique_ptr<FaultPolicy> WithProbability(double p, uint64_t seed);
std::unique_ptr<FaultPolicy> InPhase(std::string phase);
std::unique_ptr<FaultPolicy> AllOf(std::vector<std::unique_ptr<FaultPolicy>> policies);
std::unique_ptr<FaultPolicy> AnyOf(std::vector<std::unique_ptr<FaultPolicy>> policies);

// Parses one spec string (see the header comment). Returns nullptr and fills *error on bad input: an
// unknown key, a key given twice, an empty clause, a value out of range (p in (0, 1]), or, when `phases`
// is not empty, a phase not among them. The filters (phase, min-size) are evaluated before nth and p,
// whatever the written order: "nth=2,phase=backward" is the 2nd request made in backward.
std::unique_ptr<FaultPolicy> ParseFaultSpec(std::string_view spec, std::string* error,
                                            const std::vector<std::string>& phases = {});

struct InjectedFailure {
  int64_t allocation_index;  // the request's index as the injector counted it (1-based)
  int64_t bytes;
  std::string phase;
  std::string policy;  // Describe() of the policy that fired
};

class FaultInjector {
 public:
  explicit FaultInjector(std::unique_ptr<FaultPolicy> policy);

  // Counts the request; returns the failure to inject, if any (and records it).
  std::optional<InjectedFailure> Check(int64_t bytes, std::string_view phase);

  std::vector<InjectedFailure> failures() const;
  int64_t requests_seen() const;
  std::string Describe() const;

 private:
  mutable std::mutex mutex_;
  std::unique_ptr<FaultPolicy> policy_;
  int64_t requests_ = 0;
  std::vector<InjectedFailure> failures_;
};

}  // namespace oomguard
