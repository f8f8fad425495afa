// The JUnit XML report (`--report junit=FILE`): what Jenkins, GitLab and GitHub test reporters read.
//
//   std::string xml = oomguard::RenderJUnit(report);
//   // <testsuites name="oomguard" tests="8" failures="2" errors="1" skipped="1" time="4.200">
//   //   <testsuite name="forgotten-no-grad" tests="3" ...>
//   //     <testcase classname="oomguard.forgotten-no-grad" name="pitfall [cpu, NVIDIA T4 16GB]" time="0.250">
//
// Layout (the common JUnit schema, as Surefire and the Jenkins xunit plugin's junit-10.xsd describe it):
// - one <testsuite> per scenario, named after it, with its tests/failures/errors/skipped counts and time;
// - one <testcase> per variant: classname "oomguard.<scenario>", name "<variant> [<backend>, <card>]"
//   (or "cap <bytes>" without a card), so a test keeps its identity across runs for CI history;
// - a scenario without variants (a file that did not load, an unsupported backend), or with an error of
//   its own, has a testcase named "(scenario)" carrying its result and error;
// - the scenarios --filter did not select (RunResults::skipped) follow, each a suite with one
//   "(scenario)" case: <skipped message="not selected by --filter 'GLOB'" type="SKIPPED">;
// - a sharded run (--shard 2/3) names the shard in <testsuites name="oomguard shard 2/3"> and gives each
//   <testsuite> <property name="shard" value="2/3"/>, so that the merged files of a CI matrix tell
//   their shards apart; the shards' suites are disjoint, since each file is in one shard;
// - a scenario with relation checks has a testcase "(checks)" that fails when any check failed, listing
//   each failed check's explanation (all checks, with ok/skip/FAILED, go to its <system-out>).
// Result codes map as: PASS -> passed; FAIL, XPASS -> <failure type="FAIL|XPASS"> (message: the first
// reason; body: every reason, the baseline diff and the measured peak); TIMEOUT, UNRESOLVED -> <error>;
// UNSUPPORTED, SKIPPED, XFAIL -> <skipped>. Each variant's <system-out> holds its peak, phase peaks
// and baseline verdict.
//
// The output is deterministic: times are the data's duration_ms in seconds with three decimals; no
// timestamps or hostnames. Every string is escaped for XML; control characters and invalid UTF-8 that
// XML 1.0 cannot carry become U+FFFD. Rendering never fails.
#pragma once

#include <string>

#include "model/run_results.h"

namespace oomguard {

std::string RenderJUnit(const RunResults& report);

}  // namespace oomguard
