// Fuzzes what `oomguard run` parses for --cap, --context, --card and --inject (run/run_options.cpp):
// ParseByteSize, FindCard and ParseFaultSpec, each line of the input as one flag's value. The specs
// that parse are combined as repeated --inject flags are, and the injector is driven through a step's
// phases. Invariants from the headers: a size is >= 0; a card's own key finds it; errors are set.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "allocators/cards.h"
#include "allocators/fault_injection.h"
#include "base/byte_size.h"
#include "base/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oomguard;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::unique_ptr<FaultPolicy>> policies;
  while (!rest.empty()) {
    const size_t newline = rest.find('\n');
    const std::string_view line = rest.substr(0, newline);
    rest = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);

    int64_t bytes = -1;
    std::string error;
    if (ParseByteSize(line, &bytes, &error)) {
      OOMGUARD_CHECK(bytes >= 0) << "'" << line << "' is " << bytes << " bytes";
      FormatBytes(bytes);
      FormatSignedBytes(bytes);
    } else {
      OOMGUARD_CHECK(!error.empty());
    }

    error.clear();
    if (const CardPreset* card = FindCard(line, &error)) {
      OOMGUARD_CHECK(FindCard(card->key, &error) == card) << card->key << ": " << error;
      FormatBytes(card->allocator_cap_bytes());
    } else {
      OOMGUARD_CHECK(!error.empty());
    }

    error.clear();
    if (std::unique_ptr<FaultPolicy> policy = ParseFaultSpec(line, &error)) {
      // What results files show of an injection; a spec written from it is not required to parse.
      const std::string described = policy->Describe();
      std::string ignored;
      ParseFaultSpec(described, &ignored);
      policies.push_back(std::move(policy));
    } else {
      OOMGUARD_CHECK(!error.empty());
    }
  }
  if (policies.empty()) return 0;
  FaultInjector injector(policies.size() == 1 ? std::move(policies.front()) : AnyOf(std::move(policies)));
  static constexpr std::string_view kPhases[] = {"setup",    "zero_grad", "transfer", "forward",
                                                 "backward", "optimizer", "eval"};
  for (int64_t i = 0; i < 64; ++i) injector.Check(int64_t{1} << (i % 40), kPhases[i % std::size(kPhases)]);
  OOMGUARD_CHECK(injector.requests_seen() == 64);
  for (const InjectedFailure& failure : injector.failures()) OOMGUARD_CHECK(!failure.policy.empty());
  injector.Describe();
  return 0;
}
