#include "backends/meta/kernel_target.h"

#include <algorithm>
#include <mutex>
#include <optional>

#include "base/byte_size.h"

namespace oomguard {
namespace {
KernelTarget& Target() {
  static KernelTarget target;
  return target;
}
struct Warning {
  std::string text;
  std::optional<int64_t> least_bytes;  // NoteKernelWarningLeastBytes's
};
struct Warnings {
  std::mutex mutex;
  std::vector<Warning> list;
};
Warnings& KernelWarnings() {
  static Warnings warnings;
  return warnings;
}
}  // namespace

std::string Describe(const KernelTarget& target) {
  if (!target.cuda()) return "cpu";
  return "cuda sm_" + std::to_string(target.compute_capability);
}

const KernelTarget& CurrentKernelTarget() { return Target(); }
void SetKernelTarget(const KernelTarget& target) { Target() = target; }

void NoteKernelWarning(const std::string& warning) {
  Warnings& w = KernelWarnings();
  std::lock_guard<std::mutex> lock(w.mutex);
  const auto same = [&](const Warning& seen) { return seen.text == warning && !seen.least_bytes; };
  if (std::find_if(w.list.begin(), w.list.end(), same) == w.list.end()) w.list.push_back({warning, std::nullopt});
}

void NoteKernelWarningLeastBytes(const std::string& text, int64_t bytes) {
  Warnings& w = KernelWarnings();
  std::lock_guard<std::mutex> lock(w.mutex);
  const auto same = [&](const Warning& seen) { return seen.text == text && seen.least_bytes; };
  const auto it = std::find_if(w.list.begin(), w.list.end(), same);
  if (it == w.list.end()) {
    w.list.push_back({text, bytes});
  } else {
    it->least_bytes = std::min(*it->least_bytes, bytes);
  }
}

std::vector<std::string> TakeKernelWarnings() {
  Warnings& w = KernelWarnings();
  std::lock_guard<std::mutex> lock(w.mutex);
  std::vector<std::string> taken;
  for (Warning& warning : w.list) {
    std::string text = std::move(warning.text);
    const size_t at = text.find("{bytes}");
    if (warning.least_bytes && at != std::string::npos) {
      const int64_t bytes = *warning.least_bytes;
      text.replace(at, 7,
                   bytes < 1024 ? FormatBytes(bytes) : FormatBytes(bytes) + " (" + std::to_string(bytes) + " bytes)");
    }
    taken.push_back(std::move(text));
  }
  w.list.clear();
  return taken;
}

namespace {
struct Names {
  std::mutex mutex;
  std::vector<std::string> list;
};
Names& UnmirroredOps() {
  static Names names;
  return names;
}
}  // namespace

void NoteUnmirroredOp(const std::string& op) {
  Names& n = UnmirroredOps();
  std::lock_guard<std::mutex> lock(n.mutex);
  if (std::find(n.list.begin(), n.list.end(), op) == n.list.end()) n.list.push_back(op);
}

std::vector<std::string> TakeUnmirroredOps() {
  Names& n = UnmirroredOps();
  std::lock_guard<std::mutex> lock(n.mutex);
  std::vector<std::string> taken;
  taken.swap(n.list);
  return taken;
}

}  // namespace oomguard
