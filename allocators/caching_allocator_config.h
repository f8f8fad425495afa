// CachingAllocatorConfig: the settings of PyTorch's CUDA caching allocator that change where bytes
// go, read from the PYTORCH_ALLOC_CONF syntax, for CachingAllocatorModel.
//
//   std::string error;
//   std::optional<oomguard::CachingAllocatorConfig> config =
//       oomguard::ParseCachingAllocatorConfig("expandable_segments:True,max_split_size_mb:128", &error);
//   if (!config) { /* error names the key and what was expected: a usage error (exit 2) */ }
//
// The syntax, keys, units and checks are those of torch 2.11's two parsers, which both read the same
// string: AcceleratorAllocatorConfig::parseArgs (c10/core/AllocatorConfig.cpp; the keys below) and
// CUDAAllocatorConfig::parseArgs (c10/cuda/CUDAAllocatorConfig.cpp), which rejects a key neither of
// them knows ("Unrecognized key 'x' in CUDA allocator config."). Keys PyTorch knows but the model
// does not use (backend, pinned_*, release_lock_on_cudamalloc, ...) are accepted and listed in
// unmodelled_keys, so a caller can say they were ignored. Stricter than PyTorch on purpose: a
// number must be all digits (std::stoull would read "12abc" as 12, and "-1" as 2^64-1), and ':'
// after a key and ',' between pairs are required.
//
// Thread safety: plain data and pure functions. Error policy: parsing returns std::nullopt and
// fills *error; nothing throws.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomguard {

struct CachingAllocatorConfig {
  // max_split_size's default, SIZE_MAX in PyTorch: every block may be split.
  static constexpr int64_t kNoMaxSplit = std::numeric_limits<int64_t>::max();
  // roundup_power2_divisions has one entry per power-of-two interval from 1 MiB to 64 GiB:
  // entry 0 covers sizes < 2 MiB, entry k sizes in [2^k MiB, 2^(k+1) MiB), entry 15 everything above.
  static constexpr int kRoundupIntervals = 16;

  int64_t max_split_size = kNoMaxSplit;                               // bytes (max_split_size_mb * 1 MiB)
  int64_t max_non_split_rounding_size = 20 << 20;                     // bytes (max_non_split_rounding_mb), kLargeBuffer
  std::array<int64_t, kRoundupIntervals> roundup_power2_divisions{};  // 0: round to 512 bytes
  double garbage_collection_threshold = 0.0;                          // 0: off; else in (0, 1)
  bool expandable_segments = false;
  std::vector<std::string> unmodelled_keys;  // accepted, valid, and ignored by the model

  // AcceleratorAllocatorConfig::roundup_power2_divisions(size): the divisions of size's interval.
  int64_t RoundupPower2Divisions(int64_t size) const;
};

// Parses `key:value,key:value` (whitespace ignored; roundup_power2_divisions also as
// `[256:1,512:2,>:8]`). An empty text gives the defaults.
std::optional<CachingAllocatorConfig> ParseCachingAllocatorConfig(std::string_view text, std::string* error);

// The text PyTorch reads: PYTORCH_ALLOC_CONF, else the deprecated PYTORCH_CUDA_ALLOC_CONF, else
// PYTORCH_HIP_ALLOC_CONF (AcceleratorAllocatorConfig::instance); empty when none is set.
std::string CachingAllocatorConfigFromEnvironment();

}  // namespace oomguard
