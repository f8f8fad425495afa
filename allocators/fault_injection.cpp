#include "allocators/fault_injection.h"

#include <algorithm>
#include <charconv>
#include <random>

#include "base/byte_size.h"
#include "base/did_you_mean.h"

namespace oomguard {
namespace {

class Nth final : public FaultPolicy {
 public:
  explicit Nth(int64_t n) : n_(n) {}
  bool ShouldFail(const AllocationRequest&) override { return ++seen_ == n_; }
  std::string Describe() const override { return "nth=" + std::to_string(n_); }

 private:
  int64_t n_;
  int64_t seen_ = 0;
};

class MinSize final : public FaultPolicy {
 public:
  explicit MinSize(int64_t bytes) : bytes_(bytes) {}
  bool ShouldFail(const AllocationRequest& r) override { return r.bytes >= bytes_; }
  std::string Describe() const override { return "min-size=" + std::to_string(bytes_); }

 private:
  int64_t bytes_;
};

class Probability final : public FaultPolicy {
 public:
  Probability(double p, uint64_t seed) : p_(p), seed_(seed), rng_(seed) {}
  bool ShouldFail(const AllocationRequest&) override {
    // uniform_real_distribution's output differs across standard libraries; this does not.
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    return u < p_;
  }
  std::string Describe() const override {
    char buf[64];
    std::snprintf(buf, sizeof buf, "p=%g,seed=%llu", p_, static_cast<unsigned long long>(seed_));
    return buf;
  }

 private:
  double p_;
  uint64_t seed_;
  std::mt19937_64 rng_;
};

class Phase final : public FaultPolicy {
 public:
  explicit Phase(std::string phase) : phase_(std::move(phase)) {}
  bool ShouldFail(const AllocationRequest& r) override { return r.phase == phase_; }
  std::string Describe() const override { return "phase=" + phase_; }

 private:
  std::string phase_;
};

class Combined final : public FaultPolicy {
 public:
  Combined(std::vector<std::unique_ptr<FaultPolicy>> policies, bool all) : policies_(std::move(policies)), all_(all) {}
  bool ShouldFail(const AllocationRequest& r) override {
    for (auto& p : policies_) {
      if (p->ShouldFail(r) != all_) return !all_;
    }
    return all_;
  }
  std::string Describe() const override {
    std::string out;
    for (auto& p : policies_) out += (out.empty() ? "" : (all_ ? "," : " | ")) + p->Describe();
    return out;
  }

 private:
  std::vector<std::unique_ptr<FaultPolicy>> policies_;
  bool all_;
};

template <typename T>
bool ParseNumber(std::string_view text, T* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::unique_ptr<FaultPolicy> NthAllocation(int64_t n) { return std::make_unique<Nth>(n); }
std::unique_ptr<FaultPolicy> MinimumSize(int64_t bytes) { return std::make_unique<MinSize>(bytes); }
std::unique_ptr<FaultPolicy> WithProbability(double p, uint64_t seed) { return std::make_unique<Probability>(p, seed); }
std::unique_ptr<FaultPolicy> InPhase(std::string phase) { return std::make_unique<Phase>(std::move(phase)); }
std::unique_ptr<FaultPolicy> AllOf(std::vector<std::unique_ptr<FaultPolicy>> policies) {
  return std::make_unique<Combined>(std::move(policies), true);
}
std::unique_ptr<FaultPolicy> AnyOf(std::vector<std::unique_ptr<FaultPolicy>> policies) {
  return std::make_unique<Combined>(std::move(policies), false);
}

std::unique_ptr<FaultPolicy> ParseFaultSpec(std::string_view spec, std::string* error,
                                            const std::vector<std::string>& phases) {
  const std::string context = "invalid fault spec '" + std::string(spec) + "': ";
  const std::string accepted =
      "expected clauses joined by ',' from nth=N, min-size=SIZE, p=P, seed=S, phase=NAME "
      "(e.g. phase=backward,nth=2)";
  // Note [Filters before counters]: phase= and min-size= are stateless filters; nth= and p= advance on
  // each request they see. Evaluated in the written order, "nth=2,phase=backward" would count every
  // request and then veto the 2nd unless it happened in backward: a spec that silently never fires.
  // Filters go first, whatever the order written, so nth counts the requests the filters let through.
  std::vector<std::unique_ptr<FaultPolicy>> filters, counters;
  std::optional<double> probability;
  std::optional<uint64_t> seed;
  size_t probability_slot = 0;
  std::vector<std::string_view> keys_seen;
  std::string_view rest = spec;
  bool more = !rest.empty();
  while (more) {
    const size_t comma = rest.find(',');
    std::string_view clause = rest.substr(0, comma);
    more = comma != std::string_view::npos;
    rest = more ? rest.substr(comma + 1) : std::string_view();
    if (clause.empty()) {
      *error = context + "an empty clause (a ',' too many?); " + accepted;
      return nullptr;
    }
    const size_t eq = clause.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == clause.size()) {
      *error = context + "'" + std::string(clause) + "' is not KEY=VALUE; " + accepted;
      return nullptr;
    }
    std::string_view key = clause.substr(0, eq), value = clause.substr(eq + 1);
    if (std::find(keys_seen.begin(), keys_seen.end(), key) != keys_seen.end()) {
      *error = context + std::string(key) + " is given twice";
      return nullptr;
    }
    keys_seen.push_back(key);
    if (key == "nth") {
      int64_t n = 0;
      if (!ParseNumber(value, &n) || n < 1) {
        *error = context + "nth must be a whole number >= 1, got '" + std::string(value) + "'";
        return nullptr;
      }
      counters.push_back(NthAllocation(n));
    } else if (key == "min-size") {
      int64_t bytes = 0;
      std::string size_error;
      if (!ParseByteSize(value, &bytes, &size_error)) {
        *error = context + size_error;
        return nullptr;
      }
      filters.push_back(MinimumSize(bytes));
    } else if (key == "p") {
      double p = -1;
      if (!ParseNumber(value, &p) || !(p > 0 && p <= 1)) {  // written so that nan fails too
        *error = context + "p must be a probability in (0, 1], got '" + std::string(value) + "'";
        return nullptr;
      }
      probability = p;
      probability_slot = counters.size();
      counters.push_back(nullptr);  // filled below, once the seed is known
    } else if (key == "seed") {
      uint64_t s = 0;
      if (!ParseNumber(value, &s)) {
        *error = context + "seed must be a whole number >= 0, got '" + std::string(value) + "'";
        return nullptr;
      }
      seed = s;
    } else if (key == "phase") {
      const std::string name(value);
      if (!phases.empty() && std::find(phases.begin(), phases.end(), name) == phases.end()) {
        const std::string near = ClosestMatch(name, phases);
        *error = context + "unknown phase '" + name + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?") +
                 " (phases: " + JoinNames(phases, ", ") + ")";
        return nullptr;
      }
      filters.push_back(InPhase(name));
    } else {
      *error = context + "unknown key '" + std::string(key) + "'; " + accepted;
      return nullptr;
    }
  }
  if (seed && !probability) {
    *error = context + "seed is only meaningful with p=P";
    return nullptr;
  }
  if (probability) counters[probability_slot] = WithProbability(*probability, seed.value_or(0));
  std::vector<std::unique_ptr<FaultPolicy>> clauses = std::move(filters);
  for (auto& counter : counters) clauses.push_back(std::move(counter));
  if (clauses.empty()) {
    *error = context + accepted;
    return nullptr;
  }
  if (clauses.size() == 1) return std::move(clauses.front());
  return AllOf(std::move(clauses));
}

FaultInjector::FaultInjector(std::unique_ptr<FaultPolicy> policy) : policy_(std::move(policy)) {}

std::optional<InjectedFailure> FaultInjector::Check(int64_t bytes, std::string_view phase) {
  std::lock_guard<std::mutex> lock(mutex_);
  const AllocationRequest request{++requests_, bytes, phase};
  if (!policy_->ShouldFail(request)) return std::nullopt;
  failures_.push_back({request.index, bytes, std::string(phase), policy_->Describe()});
  return failures_.back();
}

std::vector<InjectedFailure> FaultInjector::failures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failures_;
}

int64_t FaultInjector::requests_seen() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

std::string FaultInjector::Describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return policy_->Describe();
}

}  // namespace oomguard
