#include "allocators/caching_allocator_config.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace oomguard {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr uint64_t kMinSplitSizeMb = 20;  // kLargeBuffer / 1 MiB: PyTorch's lower bound

// The keys CUDAAllocatorConfig::getKeys adds to the common ones: valid, not modelled.
constexpr std::string_view kUnmodelledKeys[] = {
    "backend",
    "release_lock_on_cudamalloc",
    "release_lock_on_hipmalloc",
    "pinned_use_cuda_host_register",
    "pinned_use_hip_host_register",
    "pinned_num_register_threads",
    "pinned_reserve_segment_size_mb",
    "pinned_use_background_threads",
    "graph_capture_record_stream_reuse",
    "per_process_memory_fraction",
    "pinned_free_catch_all",
    "throw_on_cudamalloc_oom",
};

// ConfigTokenizer: ',', ':', '[' and ']' are tokens of their own; whitespace is dropped.
std::vector<std::string> Tokenize(std::string_view text) {
  std::vector<std::string> tokens;
  std::string buffer;
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!buffer.empty()) tokens.push_back(std::move(buffer));
      buffer.clear();
      tokens.emplace_back(1, c);
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      buffer += c;
    }
  }
  if (!buffer.empty()) tokens.push_back(std::move(buffer));
  return tokens;
}

class Parser {
 public:
  Parser(std::vector<std::string> tokens, std::string* error) : tokens_(std::move(tokens)), error_(error) {}

  bool Run(CachingAllocatorConfig& config) {
    for (i_ = 0; i_ < tokens_.size(); ++i_) {
      const std::string key = tokens_[i_];
      if (!Expect(":", "':' after " + key)) return false;
      if (!ParseValue(key, config)) return false;
      if (i_ + 1 < tokens_.size() && !Expect(",", "',' after the value of " + key)) return false;
    }
    return true;
  }

 private:
  bool ParseValue(const std::string& key, CachingAllocatorConfig& config) {
    if (key == "max_split_size_mb" || key == "max_non_split_rounding_mb") {
      // parseMaxSplitSize / parseMaxNonSplitRoundingSize: MiB, at least 20, clamped so bytes fit.
      std::optional<uint64_t> mb = Number(key, "a whole number of MiB >= 20");
      if (!mb) return false;
      if (*mb < kMinSplitSizeMb) return Fail(key + " too small, must be >= 20 (MiB), got " + tokens_[i_]);
      const int64_t bytes =
          static_cast<int64_t>(std::min<uint64_t>(*mb, CachingAllocatorConfig::kNoMaxSplit / kMiB)) * kMiB;
      (key == "max_split_size_mb" ? config.max_split_size : config.max_non_split_rounding_size) = bytes;
      return true;
    }
    if (key == "garbage_collection_threshold") return GarbageCollectionThreshold(config);
    if (key == "roundup_power2_divisions") return RoundupPower2Divisions(config);
    if (key == "expandable_segments") {
      std::optional<bool> value = Bool(key);
      if (value) config.expandable_segments = *value;
      return value.has_value();
    }
    if (std::find(std::begin(kUnmodelledKeys), std::end(kUnmodelledKeys), key) == std::end(kUnmodelledKeys)) {
      return Fail("unrecognized key '" + key + "' in the allocator config (PyTorch: \"Unrecognized key '" + key +
                  "' in CUDA allocator config.\")");
    }
    if (key == "backend" && !Value(key)) return false;
    if (key == "backend" && tokens_[i_] != "native" && tokens_[i_] != "cudaMallocAsync") {
      return Fail("backend: expected native or cudaMallocAsync, got '" + tokens_[i_] + "'");
    }
    if (key != "backend" && !SkipValue(key)) return false;
    config.unmodelled_keys.push_back(key);
    return true;
  }

  bool GarbageCollectionThreshold(CachingAllocatorConfig& config) {
    const std::string key = "garbage_collection_threshold";
    if (!Value(key)) return false;
    const std::string& text = tokens_[i_];
    char* end = nullptr;
    errno = 0;
    const double value = std::strtod(text.c_str(), &end);
    // parseGarbageCollectionThreshold: "garbage_collect_threshold is invalid, set it in (0.0, 1.0)".
    if (end != text.c_str() + text.size() || errno != 0 || !(value > 0.0 && value < 1.0)) {
      return Fail(key + ": expected a number in (0.0, 1.0), got '" + text + "'");
    }
    config.garbage_collection_threshold = value;
    return true;
  }

  // parseRoundUpPower2Divisions: one number for every interval, or `[MiB:divisions,...,>:divisions]`.
  bool RoundupPower2Divisions(CachingAllocatorConfig& config) {
    const std::string key = "roundup_power2_divisions";
    auto& divisions = config.roundup_power2_divisions;
    if (!Value(key)) return false;
    if (tokens_[i_] != "[") {
      std::optional<uint64_t> value = CurrentNumber(key, "a power of 2");
      if (!value) return false;
      if (!std::has_single_bit(*value))
        return Fail(key + ": the divisions have to be a power of 2, got " + tokens_[i_]);
      divisions.fill(static_cast<int64_t>(*value));
      return true;
    }
    size_t last_index = 0;
    bool first_value = true;
    while (++i_ < tokens_.size() && tokens_[i_] != "]") {
      const std::string boundary = tokens_[i_];
      if (!Expect(":", "':' after " + boundary + " in " + key)) return false;
      std::optional<uint64_t> value = Number(key, "divisions that are a power of 2 or 0");
      if (!value) return false;
      if (*value != 0 && !std::has_single_bit(*value)) {
        return Fail(key + ": the divisions have to be a power of 2 or 0, got " + tokens_[i_]);
      }
      if (boundary == ">") {
        // Every interval above the last one named.
        std::fill(divisions.begin() + static_cast<std::ptrdiff_t>(std::min(last_index + 1, divisions.size())),
                  divisions.end(), static_cast<int64_t>(*value));
      } else {
        std::optional<uint64_t> mb = NumberText(boundary);
        if (!mb || !std::has_single_bit(*mb)) {
          return Fail(key + ": the intervals have to be a power of 2 (MiB), got '" + boundary + "'");
        }
        const size_t index = std::min<size_t>(static_cast<size_t>(std::bit_width(*mb) - 1), divisions.size() - 1);
        // The first interval named also sets every interval below it.
        if (first_value)
          std::fill(divisions.begin(), divisions.begin() + static_cast<std::ptrdiff_t>(index),
                    static_cast<int64_t>(*value));
        first_value = false;
        divisions[index] = static_cast<int64_t>(*value);
        last_index = index;
      }
      if (i_ + 1 < tokens_.size() && tokens_[i_ + 1] != "]" && !Expect(",", "',' or ']' in " + key)) return false;
    }
    if (i_ >= tokens_.size()) return Fail(key + ": expected a closing ']'");
    return true;
  }

  std::optional<bool> Bool(const std::string& key) {
    if (!Value(key)) return std::nullopt;
    if (tokens_[i_] == "True") return true;
    if (tokens_[i_] == "False") return false;
    Fail(key + ": expected True or False, got '" + tokens_[i_] + "'");
    return std::nullopt;
  }

  // ConfigTokenizer::skipKey: a single value, or a bracketed list up to its ']'.
  bool SkipValue(const std::string& key) {
    if (!Value(key)) return false;
    if (tokens_[i_] != "[") return true;
    while (++i_ < tokens_.size() && tokens_[i_] != "]") {
    }
    return i_ < tokens_.size() || Fail(key + ": expected a closing ']'");
  }

  static std::optional<uint64_t> NumberText(const std::string& text) {
    if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    errno = 0;
    const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
    if (errno == ERANGE) return std::nullopt;
    return value;
  }

  std::optional<uint64_t> Number(const std::string& key, const std::string& expected) {
    if (!Value(key)) return std::nullopt;
    return CurrentNumber(key, expected);
  }

  std::optional<uint64_t> CurrentNumber(const std::string& key, const std::string& expected) {
    std::optional<uint64_t> value = NumberText(tokens_[i_]);
    if (!value) Fail(key + ": expected " + expected + ", got '" + tokens_[i_] + "'");
    return value;
  }

  // Moves to the next token, which must be a value (not a separator).
  bool Value(const std::string& key) {
    if (++i_ >= tokens_.size() || tokens_[i_] == "," || tokens_[i_] == ":" || tokens_[i_] == "]") {
      return Fail(key + ": expected a value");
    }
    return true;
  }

  bool Expect(const char* token, const std::string& what) {
    if (++i_ < tokens_.size() && tokens_[i_] == token) return true;
    return Fail("expected " + what);
  }

  bool Fail(const std::string& message) {
    if (error_) *error_ = "allocator config: " + message;
    return false;
  }

  std::vector<std::string> tokens_;
  std::string* error_;
  size_t i_ = 0;
};

}  // namespace

int64_t CachingAllocatorConfig::RoundupPower2Divisions(int64_t size) const {
  // Intervals start at 1 MiB (2^20): index = floor(log2(size)) - 20, clamped to [0, 15].
  const int log_size = std::bit_width(static_cast<uint64_t>(size)) - 1;
  const int index = std::clamp(log_size - 20, 0, kRoundupIntervals - 1);
  return roundup_power2_divisions[static_cast<size_t>(index)];
}

std::optional<CachingAllocatorConfig> ParseCachingAllocatorConfig(std::string_view text, std::string* error) {
  CachingAllocatorConfig config;
  Parser parser(Tokenize(text), error);
  if (!parser.Run(config)) return std::nullopt;
  return config;
}

std::string CachingAllocatorConfigFromEnvironment() {
  for (const char* name : {"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"}) {
    if (const char* value = std::getenv(name)) return value;
  }
  return {};
}

}  // namespace oomguard
