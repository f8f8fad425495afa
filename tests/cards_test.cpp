#include "allocators/cards.h"

#include <gtest/gtest.h>

#include <set>

#include "base/byte_size.h"

namespace oomguard {
namespace {

const CardPreset& Card(const std::string& name) {
  std::string error;
  const CardPreset* card = FindCard(name, &error);
  EXPECT_NE(card, nullptr) << error;
  return *card;
}

TEST(Cards, T4ReportsWhatPyTorchPrints) {
  const CardPreset& t4 = Card("t4");
  EXPECT_EQ(t4.total_bytes, 15828254720);
  EXPECT_EQ(FormatBytes(t4.total_bytes), "14.74 GiB");
  EXPECT_EQ(t4.context_bytes, 426LL * 1024 * 1024);
  EXPECT_EQ(t4.allocator_cap_bytes(), 15828254720 - 446693376);
}

TEST(Cards, TheIssueListIsCovered) {
  for (const char* name : {"t4", "l4", "a10", "rtx3060", "rtx3090", "rtx4090", "v100-16gb", "v100-32gb", "a100-40gb",
                           "a100-80gb", "h100", "h200"}) {
    EXPECT_GT(Card(name).allocator_cap_bytes(), 0) << name;
  }
  EXPECT_EQ(FormatBytes(Card("h200").total_bytes), "139.80 GiB");
  EXPECT_EQ(FormatBytes(Card("v100-32gb").total_bytes), "31.75 GiB");
}

TEST(Cards, NamesAreCaseInsensitiveAndHaveAliases) {
  EXPECT_EQ(&Card("T4"), &Card("t4"));
  EXPECT_EQ(&Card("3090"), &Card("rtx3090"));
  EXPECT_EQ(&Card("RTX-4090"), &Card("rtx4090"));
  EXPECT_EQ(&Card("H100-SXM"), &Card("h100"));
  EXPECT_EQ(&Card("h100-80gb"), &Card("h100"));  // spelt as a100-80gb is
}

TEST(Cards, EveryPresetIsWellFormed) {
  std::set<std::string_view> keys;
  for (const CardPreset& card : AllCards()) {
    EXPECT_TRUE(keys.insert(card.key).second) << "duplicate key " << card.key;
    EXPECT_GT(card.total_bytes, card.context_bytes) << card.key;
    EXPECT_FALSE(card.source.empty()) << card.key;
    EXPECT_FALSE(card.display_name.empty()) << card.key;
    EXPECT_GT(card.device.sm_count, 0) << card.key;
    EXPECT_EQ(card.device.warp_size, 32) << card.key;
  }
}

// What the kernels read from cudaDeviceProp (Note [A card's SM count in card mode]): deviceQuery's
// "(082) Multiprocessors" and 1536 threads a multiprocessor for an RTX 3090, an sm_86 card like the A10
// (72 SMs) that is sm_86's reference; 1024 threads an SM on sm_75, 2048 on sm_80 and sm_90.
TEST(Cards, PresetsCarryWhatTheKernelsReadFromTheCard) {
  std::string error;
  EXPECT_EQ(FindCard("rtx3090", &error)->device, (CudaDeviceProps{82, 1536, 32}));
  EXPECT_EQ(FindCard("t4", &error)->device, (CudaDeviceProps{40, 1024, 32}));
  EXPECT_EQ(FindCard("h100-pcie", &error)->device, (CudaDeviceProps{114, 2048, 32}));
  EXPECT_EQ(FindCard("a100-80gb", &error)->device, ReferenceDeviceProps(80));
  EXPECT_EQ(ReferenceDeviceProps(86), (CudaDeviceProps{72, 1536, 32}));
  EXPECT_EQ(ReferenceDeviceProps(61), ReferenceDeviceProps(80));  // unknown: an A100's
}

TEST(Cards, AmbiguousAndUnknownNamesSayWhatIsAccepted) {
  std::string error;
  EXPECT_EQ(FindCard("a100", &error), nullptr);
  EXPECT_EQ(error, "card 'a100' is ambiguous: use a100-40gb or a100-80gb");
  EXPECT_EQ(FindCard("x100", &error), nullptr);
  EXPECT_EQ(error,
            "unknown card 'x100'; known cards: t4, l4, a10, a10g, rtx3060, rtx3090, rtx4090, v100-16gb, "
            "v100-32gb, a100-40gb, a100-80gb, h100, h100-pcie, h200, l40s, rtx-a6000 (see `oomguard cards`)");
}

}  // namespace
}  // namespace oomguard
