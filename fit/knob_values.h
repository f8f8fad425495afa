// The values a fit search may try, in increasing order: every integer in [min, max] (batch, seq), or
// the world sizes a cluster is built of: powers of two below a node's GPU count, then whole nodes.
//
//   oomguard::KnobValues every = oomguard::KnobValues::Integers(1, 1048576);   // 1, 2, 3, ...
//   oomguard::KnobValues world = oomguard::KnobValues::Nodes(1, 4096, 8);      // 1, 2, 4, 8, 16, 24, ...
//   world.Middle(32, 64);  // 48: the middle of 40, 48, 56
//
// Note [World sizes a fit tries]: a data-parallel job runs on part of one node (1, 2 or 4 of its 8
// GPUs: a power of two, which sharding and tensor parallelism divide evenly) or on whole nodes (a
// multiple of 8). So `--knob world` tries 1, 2, 4, 8, then multiples of 8 (`--gpus-per-node N` for
// nodes of another power-of-two size; 1 tries every integer). Odd worlds (12, 20) would answer a
// question no scheduler asks, and cost trials. Every search doubles from the first value and then
// bisects between two of these values, so the answer is always one of them.
//
// Pure arithmetic; a programmer's error (a value not in the set, a step that is no power of two)
// aborts through OOMGUARD_CHECK.
#pragma once

#include <cstdint>
#include <optional>

namespace oomguard {

class KnobValues {
 public:
  // Every integer in [min, max]. Requires 1 <= min.
  static KnobValues Integers(int64_t min, int64_t max) { return KnobValues(min, max, 1); }
  // Powers of two below `per_node`, then multiples of it, within [min, max]. Requires per_node a power
  // of two; per_node 1 is Integers.
  static KnobValues Nodes(int64_t min, int64_t max, int64_t per_node) { return KnobValues(min, max, per_node); }

  bool empty() const { return !first_ || !last_ || *first_ > *last_; }
  int64_t first() const;  // the smallest value in the set (not empty)
  int64_t last() const;   // the largest
  int64_t per_node() const { return per_node_; }
  bool Contains(int64_t value) const;

  // The value after doubling `value`: the smallest one >= 2 value, or last() when that is past it.
  int64_t Doubled(int64_t value) const;
  // A value strictly between two of the set's values, halving the ones between them; none when they
  // are neighbours. For Integers: low + (high - low) / 2.
  std::optional<int64_t> Middle(int64_t low, int64_t high) const;

 private:
  KnobValues(int64_t min, int64_t max, int64_t per_node);
  // Any value >= 1 (not only the set's) rounded up or down to the unbounded ladder 1, 2, 4, ..,
  // per_node, 2 per_node, ...
  int64_t Ceil(int64_t value) const;
  int64_t Floor(int64_t value) const;
  int64_t Index(int64_t ladder_value) const;  // its position on the unbounded ladder, from 0
  int64_t At(int64_t index) const;

  int64_t per_node_ = 1;
  int64_t node_bits_ = 0;  // log2(per_node_)
  std::optional<int64_t> first_, last_;
};

}  // namespace oomguard
