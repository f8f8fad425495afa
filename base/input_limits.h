// The limits on what oomguard reads, in one place: input files are written by people and by tools,
// and a file that is huge, deeply nested or adversarial must get a clear error, never a crash, a hang
// or a host that runs out of memory. scenarios/FORMAT.md ("Limits") states them for users; each limit's
// message names the limit and where it was exceeded.
#pragma once

#include <cstdint>

namespace oomguard::limits {

// Scenario, baseline and results files (ReadFile refuses larger ones). The catalog's largest file is
// about 12 KiB and a baseline file about 30 KiB; a results file of thousands of variants stays far below.
inline constexpr int64_t kMaxInputFileBytes = 16 << 20;

// Arrays and objects inside one another in a JSON document. The format's deepest path is about 8 deep.
inline constexpr int kMaxJsonDepth = 64;

// Lists, tuples, dicts and objects inside one another in a TorchScript module's attribute (Note
// [Containers in a module's attributes], nn/torchscript/torchscript_archive.cpp): nn.LSTM's `_flat_weights` is 1 deep.
inline constexpr int kMaxAttributeNesting = 64;

// One check expression: characters, and parentheses inside one another. The catalog's longest
// expression has 156 characters. Bounding the length also bounds the tree's depth (a sum of terms is a
// chain), which the evaluator and the renderer walk recursively.
inline constexpr int kMaxCheckExpressionChars = 2000;
inline constexpr int kMaxCheckNesting = 32;

// A model's layers, `repeat` expanded: the 70B catalog model has 83. Each variant holds its own list.
inline constexpr int64_t kMaxLayers = 10000;

// Variants in one scenario (the catalog's most is 14): each runs in a process of its own.
inline constexpr int kMaxVariants = 100;

// Characters in a scenario's and in a variant's name: files are named after them (the baseline
// NAME.json and its temporary .NAME.json.tmp.PID, the snapshot NAME.VARIANT.BACKEND.pickle), and each
// file name must stay below NAME_MAX (255 bytes) or it can never be written. 100 + 100 + the rest is
// 214 at most. The catalog's longest name has 26 characters.
inline constexpr int kMaxNameChars = 100;

}  // namespace oomguard::limits
