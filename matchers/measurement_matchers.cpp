// The matchers of oomguard/gtest.h: each a predicate on a Measurement with a sentence for its
// failure; GoogleTest prints the measurement itself (PrintTo).
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include "oomguard/gtest.h"

namespace oomguard {
namespace {

// Fills *why and returns whether m matches.
using Predicate = std::function<bool(const Measurement& m, std::string* why)>;

class MeasurementMatcherImpl : public ::testing::MatcherInterface<const Measurement&> {
 public:
  MeasurementMatcherImpl(std::string description, Predicate predicate)
      : description_(std::move(description)), predicate_(std::move(predicate)) {}

  bool MatchAndExplain(const Measurement& m, ::testing::MatchResultListener* listener) const override {
    std::string why;
    const bool matched = predicate_(m, &why);
    *listener << why;
    return matched;
  }
  void DescribeTo(std::ostream* os) const override { *os << description_; }
  void DescribeNegationTo(std::ostream* os) const override { *os << "not: " << description_; }

 private:
  std::string description_;
  Predicate predicate_;
};

MeasurementMatcher Make(std::string description, Predicate predicate) {
  return ::testing::MakeMatcher(new MeasurementMatcherImpl(std::move(description), std::move(predicate)));
}

std::string Over(int64_t bytes, int64_t budget) {
  const int64_t by = bytes - budget;
  return DescribeBytes(bytes) + (by > 0 ? ", " + DescribeBytes(by) + " over " : ", within ") + DescribeBytes(budget);
}

// A failed run's numbers stop where it stopped: no budget matches it.
bool RequirePass(const Measurement& m, std::string* why) {
  if (m.passed()) return true;
  *why = "the run did not pass: " + m.outcome +
         (m.error.empty() ? "" : " (" + m.error.substr(0, m.error.find('\n')) + ")");
  return false;
}

}  // namespace

MeasurementMatcher Passes() {
  return Make("passes", [](const Measurement& m, std::string* why) { return RequirePass(m, why); });
}

MeasurementMatcher PeakIsAtMost(int64_t bytes) {
  return Make("peaks at most " + DescribeBytes(bytes), [bytes](const Measurement& m, std::string* why) {
    if (!RequirePass(m, why)) return false;
    *why = "peak " + Over(m.peak_bytes, bytes) + ", in " + m.peak_phase;
    return m.peak_bytes <= bytes;
  });
}
MeasurementMatcher PeakIsAtMost(const std::string& size) { return PeakIsAtMost(ParseBytes(size)); }

MeasurementMatcher PhasePeakIsAtMost(const std::string& phase, int64_t bytes) {
  return Make("peaks at most " + DescribeBytes(bytes) + " in phase " + phase,
              [phase, bytes](const Measurement& m, std::string* why) {
                if (!RequirePass(m, why)) return false;
                auto it = m.phase_peak_bytes.find(phase);
                if (it == m.phase_peak_bytes.end()) {
                  std::string entered;
                  for (const auto& [name, peak] : m.phase_peak_bytes) entered += (entered.empty() ? "" : ", ") + name;
                  *why = "phase " + phase + " was never entered (entered: " + entered + ")";
                  return false;
                }
                *why = "phase " + phase + " peaks at " + Over(it->second, bytes);
                return it->second <= bytes;
              });
}
MeasurementMatcher PhasePeakIsAtMost(const std::string& phase, const std::string& size) {
  return PhasePeakIsAtMost(phase, ParseBytes(size));
}

MeasurementMatcher DoesNotLeak() {
  return Make("does not leak (live bytes do not grow from iteration to iteration)",
              [](const Measurement& m, std::string* why) {
                if (!RequirePass(m, why)) return false;
                if (!m.live_growth_per_iteration_bytes) {
                  *why = "a leak needs at least 2 iterations to show; it ran " +
                         std::to_string(m.live_after_iteration_bytes.size());
                  return false;
                }
                const double growth = *m.live_growth_per_iteration_bytes;
                *why = "live bytes grow by " + DescribeBytes(static_cast<int64_t>(growth)) + " per iteration";
                return growth <= 0;
              });
}

namespace {

std::string Found(const Measurement& m) {
  if (m.diagnoses.empty()) return "the detectors found nothing";
  std::string out = "the detectors found";
  for (const Measurement::Diagnosis& d : m.diagnoses) out += "\n  " + d.kind + ": " + d.message + "\n    fix: " + d.fix;
  return out;
}

}  // namespace

MeasurementMatcher HasDiagnosis(const std::string& kind) {
  return Make("is diagnosed with " + kind, [kind](const Measurement& m, std::string* why) {
    *why = Found(m);
    return m.diagnosis(kind) != nullptr;
  });
}

MeasurementMatcher HasNoPitfalls() {
  return Make("has no pitfall diagnosed", [](const Measurement& m, std::string* why) {
    *why = Found(m);
    for (const Measurement::Diagnosis& d : m.diagnoses) {
      if (d.severity == "pitfall") return false;
    }
    return true;
  });
}

MeasurementMatcher FitsCard(const std::string& card) {
  // An unknown card fails the expectation with the reason, as any other miss does; throwing here would
  // end the test at EXPECT_THAT's argument with no matcher message.
  int64_t cap = 0;
  try {
    cap = CardCapBytes(card);
  } catch (const std::invalid_argument& unknown) {
    const std::string what = unknown.what();
    const std::string reason = "FitsCard(\"" + card + "\"): " + what.substr(what.find(": ") + 2);
    return Make("fits a " + card, [reason](const Measurement&, std::string* why) {
      *why = reason;
      return false;
    });
  }
  return Make("fits a " + card + " (" + DescribeBytes(cap) + " usable)",
              [card, cap](const Measurement& m, std::string* why) {
                if (m.ran_out_of_memory() && m.oom && !m.oom->injected && m.cap_bytes >= 0 && m.cap_bytes < cap) {
                  *why = "it ran out of memory under a cap of " + DescribeBytes(m.cap_bytes) + ", smaller than the " +
                         card + "'s: measure it without a cap (or with .card = \"" + card + "\") to know";
                  return false;
                }
                if (!RequirePass(m, why)) return false;
                *why = "peak " + Over(m.peak_bytes, cap) + " (the " + card + "'s usable bytes), in " + m.peak_phase;
                return m.peak_bytes <= cap;
              });
}

MeasurementMatcher RunsOutOfMemoryAt(int64_t cap) {
  return Make("runs out of memory at a cap of " + DescribeBytes(cap), [cap](const Measurement& m, std::string* why) {
    if (m.ran_out_of_memory()) {
      if (m.oom && m.oom->injected) {
        *why = "its OOM was an injected failure, not the cap";
        return false;
      }
      if (m.cap_bytes >= cap) {
        *why = "it ran out of memory at a cap of " + DescribeBytes(m.cap_bytes);
        return true;
      }
      *why = "it ran out of memory at a cap of " + DescribeBytes(m.cap_bytes) + ", smaller than " + DescribeBytes(cap) +
             ": measure it without a cap (or at that cap) to know";
      return false;
    }
    if (!RequirePass(m, why)) return false;
    *why = "it passed with a peak of " + DescribeBytes(m.peak_bytes) + " in " + m.peak_phase +
           (m.peak_bytes > cap ? ", above the cap" : ", which the cap holds");
    return m.peak_bytes > cap;
  });
}
MeasurementMatcher RunsOutOfMemoryAt(const std::string& cap) { return RunsOutOfMemoryAt(ParseBytes(cap)); }

void PrintTo(const Measurement& m, std::ostream* os) { *os << "\n" << m.Describe(); }

}  // namespace oomguard
