// GoogleTest matchers on an oomguard::Measurement (oomguard/measure.h): memory budgets of your own
// training code as unit tests, exact on cpu and meta. Link oomguard::gtest (it brings oomguard::oomguard,
// GoogleTest and GoogleMock) and GTest::gtest_main, or a main of your own: oomguard::gtest has none.
//
//   #include <oomguard/gtest.h>
//
//   TEST(Memory, TrainStepFitsAT4) {
//     const oomguard::Measurement m = oomguard::Measure(TrainStep, {.backend = "meta"});
//     EXPECT_THAT(m, oomguard::FitsCard("t4"));
//     EXPECT_THAT(m, oomguard::PeakIsAtMost("9MiB"));
//     EXPECT_THAT(m, oomguard::PhasePeakIsAtMost("eval", 3 << 20));
//     EXPECT_THAT(m, oomguard::DoesNotLeak());
//     EXPECT_THAT(oomguard::Measure(TrainStep, {.knobs = {{"batch", int64_t{4096}}}}),
//                 oomguard::RunsOutOfMemoryAt("8GiB"));
//   }
//
// A failure prints the whole measurement (Measurement::Describe: the peak and its phase, what was live
// at the peak by the phase that allocated it, every phase's peak, live bytes per iteration) and says
// by how much the budget was missed. A measurement that ran out of memory or failed matches none of
// the budget matchers: its peak is only known up to where it stopped.
//
// Sizes are bytes, or text as --cap takes it ("9MiB", "12GiB").
#pragma once

#include <gmock/gmock.h>

#include <cstdint>
#include <ostream>
#include <string>

#include "oomguard/measure.h"

namespace oomguard {

using MeasurementMatcher = ::testing::Matcher<const Measurement&>;

// outcome "pass".
MeasurementMatcher Passes();
// Passes, and the peak is at most `bytes`.
MeasurementMatcher PeakIsAtMost(int64_t bytes);
MeasurementMatcher PeakIsAtMost(const std::string& size);
// Passes, entered `phase`, and the peak while it was current is at most `bytes`.
MeasurementMatcher PhasePeakIsAtMost(const std::string& phase, int64_t bytes);
MeasurementMatcher PhasePeakIsAtMost(const std::string& phase, const std::string& size);
// Passes with at least two iterations, and live bytes do not grow from the first to the last.
MeasurementMatcher DoesNotLeak();

// The detectors found a diagnosis of this kind ("eval-keeps-graph", "leak", ...: scenarios/FORMAT.md,
// "Diagnoses"); HasNoPitfalls: they found none but advice (activations-dominate). On failure the message
// lists what was found, with each one's bytes and fix.
MeasurementMatcher HasDiagnosis(const std::string& kind);
MeasurementMatcher HasNoPitfalls();
// Passes, and the peak fits the card's usable bytes (CardCapBytes): measured without a cap or under
// a larger one, the peak says; under the card's own cap, the outcome does.
MeasurementMatcher FitsCard(const std::string& card);
// Would run out of memory at `cap` bytes: ran out at that cap or a larger one, or passed with a peak
// above it (on cpu and meta the allocation sequence is deterministic, so a peak above the cap means
// an allocation the cap refuses). An injected failure is not running out of memory.
MeasurementMatcher RunsOutOfMemoryAt(int64_t cap);
MeasurementMatcher RunsOutOfMemoryAt(const std::string& cap);

// How GoogleTest prints a Measurement: its Describe().
void PrintTo(const Measurement& m, std::ostream* os);

}  // namespace oomguard
