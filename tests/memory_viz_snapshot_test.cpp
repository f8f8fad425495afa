// The memory_viz snapshot of a synthetic trace, read back whole: the golden text below is the dict
// Python's pickle.load returns, as Python prints it.
#include "memviz/memory_viz_snapshot.h"

#include <gtest/gtest.h>

#include "tests/pickle_reader.h"

namespace oomguard {
namespace {

TraceRecord SyntheticTrace() {
  TraceRecord r;
  r.labels = {{"forward", "the forward of layer 0:linear"}, {"backward", ""}};
  r.events = {{TraceAction::kAlloc, 0x1000, 512, 0, 0, 10},
              {TraceAction::kAlloc, 0x2000, 2 << 20, 0, 0, 11},
              {TraceAction::kFree, 0x1000, 512, 0, 1, 12},
              {TraceAction::kOom, 0, 4096, 100, 1, 13}};
  r.live = {{0x2000, 2 << 20, 0}};
  r.dropped_events = 0;
  return r;
}

const SnapshotSource kSource{"s.json", "s", "v", "cpu", 2 << 20};

TEST(MemoryVizSnapshot, SyntheticTraceGivesTheSnapshotDict) {
  const std::string f0 =
      "[{'filename': 's.json', 'line': 0, 'name': 'the forward of layer 0:linear'}, "
      "{'filename': 's.json', 'line': 0, 'name': 'phase forward'}, "
      "{'filename': 's.json', 'line': 0, 'name': 'variant v on cpu'}]";
  const std::string f1 =
      "[{'filename': 's.json', 'line': 0, 'name': 'phase backward'}, "
      "{'filename': 's.json', 'line': 0, 'name': 'variant v on cpu'}]";
  auto entry = [](const std::string& action, const std::string& addr, const std::string& size, int t,
                  const std::string& frames) {
    return "{'action': '" + action + "', 'addr': " + addr + ", 'size': " + size +
           ", 'stream': 0, 'time_us': " + std::to_string(t) + ", 'frames': " + frames + "}";
  };
  const std::string expected =
      "{'segments': [{'device': 0, 'address': 8192, 'total_size': 2097152, 'allocated_size': 2097152, "
      "'active_size': 2097152, 'requested_size': 2097152, 'stream': 0, 'segment_type': 'large', "
      "'is_expandable': False, 'frames': " +
      f0 +
      ", 'blocks': [{'address': 8192, 'size': 2097152, "
      "'requested_size': 2097152, 'state': 'active_allocated', 'frames': " +
      f0 +
      "}]}], "
      "'device_traces': [[" +
      entry("segment_alloc", "4096", "512", 10, f0) + ", " + entry("alloc", "4096", "512", 10, f0) + ", " +
      entry("segment_alloc", "8192", "2097152", 11, f0) + ", " + entry("alloc", "8192", "2097152", 11, f0) + ", " +
      entry("free_requested", "4096", "512", 12, f1) + ", " + entry("free_completed", "4096", "512", 12, f1) + ", " +
      entry("segment_free", "4096", "512", 12, f1) + ", " +
      "{'action': 'oom', 'device_free': 100, 'size': 4096, 'stream': 0, 'time_us': 13, 'frames': " + f1 + "}]], " +
      "'oomguard': {'scenario': 's', 'variant': 'v', 'backend': 'cpu', 'cap_bytes': 2097152, 'dropped_events': 0}}";
  EXPECT_EQ(testing::RenderPickle(MemoryVizPickle(SyntheticTrace(), kSource)), expected);
}

TEST(MemoryVizSnapshot, SmallBlocksAreSmallSegmentsAndAnEmptyTraceIsValid) {
  TraceRecord r;
  r.labels = {{"setup", ""}};
  r.live = {{0x40, 1 << 20, 0}};  // exactly 1 MiB: the caching allocator's small pool still
  const std::string text = testing::RenderPickle(MemoryVizPickle(r, kSource));
  EXPECT_NE(text.find("'segment_type': 'small'"), std::string::npos) << text;
  EXPECT_NE(text.find("'device_traces': [[]]"), std::string::npos) << text;
}

TEST(MemoryVizSnapshot, EachLabelsFramesAreWrittenOnce) {
  const std::string bytes = MemoryVizPickle(SyntheticTrace(), kSource);
  size_t count = 0;
  for (size_t at = bytes.find("phase forward"); at != std::string::npos; at = bytes.find("phase forward", at + 1))
    ++count;
  EXPECT_EQ(count, 1u);  // the other five uses are memo references
}

}  // namespace
}  // namespace oomguard
