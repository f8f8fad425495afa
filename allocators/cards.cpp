#include "allocators/cards.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace oomguard {
namespace {

constexpr int64_t MiB(int64_t n) { return n * 1024 * 1024; }
constexpr int64_t kCtx = kDefaultContextBytes;

// maxThreadsPerMultiProcessor by compute capability: the CUDA C Programming Guide's "Maximum number of
// resident threads per SM" (2048 on 7.0, 8.0, 9.0, 10.0; 1024 on 7.5; 1536 on 8.6, 8.9, 12.0), which
// the deviceQuery logs cited below print too.
constexpr int ThreadsPerSm(int cc) { return cc == 75 ? 1024 : (cc == 86 || cc == 89 || cc == 120) ? 1536 : 2048; }
constexpr CudaDeviceProps Sms(int sm_count, int cc) { return {sm_count, ThreadsPerSm(cc), 32}; }

// SM counts (multiProcessorCount): the deviceQuery logs the capacities cite where they print
// "(NNN) Multiprocessors" (L4 58, RTX 3090 82, RTX 4090 128, A100 80GB 108, H100 SXM 132, L40S 142),
// else NVIDIA's whitepapers and datasheets: Turing (T4: 40 SMs), Volta (V100: 80), Ampere GA100 (A100:
// 108) and GA102 (A10: 72 = 9216 CUDA cores / 128; RTX A6000: 84 = 10752 / 128; RTX 3060, GA106: 28 =
// 3584 / 128), A10G as AWS's g5 deviceQuery reports it (80), Hopper (H100 PCIe: 114; H200, the same
// GH100 configuration as H100 SXM: 132).

// A new card also needs its MiB in cmake/oomguardCards.cmake, what a cuda CTest asks for
// (tests/package/card_table.cmake rewrites it; Package.CardTableMatchesOomguardCards checks it).
// Figures are torch.cuda.get_device_properties().total_memory / deviceQuery "total global memory" as
// reported in public logs. Where several drivers disagree the value named in the source is used.
constexpr std::array kCards{
    CardPreset{"t4", "NVIDIA T4 16GB", MiB(15095), kCtx,
               "15095 MiB = 14.74 GiB, the total in PyTorch OOM messages on Colab with a CUDA 12.4 driver "
               "(sylvia-ymlin/cuda-kernels-from-scratch README)",
               75, Sms(40, 75)},
    CardPreset{"l4", "NVIDIA L4 24GB", 23'570'219'008, kCtx,
               "deviceQuery with driver 550.90: 22478 MiB (thamada/nvidia-smi gls/L4_deviceQuery.py)",
               89, Sms(58, 89)},
    CardPreset{"a10", "NVIDIA A10 24GB", 23'609'475'072, kCtx,
               "deviceQuery with CUDA 12.2 (aalanwyr/face2cuda step2cuda/README.md)",
               86, Sms(72, 86)},
    CardPreset{"a10g", "NVIDIA A10G 24GB", MiB(22587), kCtx,
               "22587 MiB in a cu130 PyTorch log; older logs show 22.20 GiB "
               "(XavierXiao/Dreambooth-Stable-Diffusion#18)",
               86, Sms(80, 86)},
    CardPreset{"rtx3060", "NVIDIA GeForce RTX 3060 12GB", MiB(12032), kCtx,
               "11.75 GiB in PyTorch OOM messages on Linux (TencentARC/PhotoMaker#47, "
               "Kunhao-Liu/StyleGaussian#12); exact bytes unpublished, 12032 MiB taken",
               86, Sms(28, 86)},
    CardPreset{"rtx3090", "NVIDIA GeForce RTX 3090 24GB", 25'327'697'920, kCtx,
               "deviceQuery with a CUDA 12.6 driver: 24154 MiB (thamada/nvidia-smi gls/RTX3090_deviceQuery.py)",
               86, Sms(82, 86)},
    CardPreset{"rtx4090", "NVIDIA GeForce RTX 4090 24GB", 25'386'352'640, kCtx,
               "deviceQuery with CUDA 12.4: 24210 MiB (thamada/nvidia-smi gls/RTX4090_deviceQuery.py)",
               89, Sms(128, 89)},
    CardPreset{"v100-16gb", "NVIDIA V100 16GB (SXM2)", MiB(16160), kCtx,
               "16160 MiB = 15.78 GiB (torch 1.8 cu101 log; kchengiva/Shift-GCN#34)",
               70, Sms(80, 70)},
    CardPreset{"v100-32gb", "NVIDIA V100 32GB", 34'089'730'048, kCtx,
               "32510 MiB = 31.75 GiB (ChatGLM-Finetuning#73 shows 31.74 GiB)",
               70, Sms(80, 70)},
    CardPreset{"a100-40gb", "NVIDIA A100 40GB (SXM4)", 42'298'834'944, kCtx,
               "40339 MiB with a CUDA 12.2 driver (bottlerocket-os/bottlerocket#3873)",
               80, Sms(108, 80)},
    CardPreset{"a100-80gb", "NVIDIA A100 80GB (SXM4)", 85'100'068'864, kCtx,
               "81158 MiB with a CUDA 12.5 driver (thamada/nvidia-smi gls/A100SXMx4_deviceQuery.py)",
               80, Sms(108, 80)},
    CardPreset{"h100", "NVIDIA H100 80GB (SXM)", 85'045'477'376, kCtx,
               "81106 MiB with a CUDA 12.7 driver (thamada/nvidia-smi nvsim/H100SXMx8_deviceQuery.py)",
               90, Sms(132, 90)},
    CardPreset{"h100-pcie", "NVIDIA H100 80GB (PCIe)", MiB(81008), kCtx,
               "81008 MiB = 79.11 GiB (torch 2.0.1 cu117 log; vllm-project/vllm#27508)",
               90, Sms(114, 90)},
    CardPreset{"h200", "NVIDIA H200 141GB", MiB(143156), kCtx,
               "143156 MiB = 139.80 GiB (Modal; thundergolfer.com nvidia-gpu-memory-capacity)",
               90, Sms(132, 90)},
    CardPreset{"l40s", "NVIDIA L40S 48GB", 47'803'596'800, kCtx,
               "deviceQuery with CUDA 12.4: 45589 MiB (thamada/nvidia-smi nvsim/L40S_deviceQuery.py)",
               89, Sms(142, 89)},
    CardPreset{"rtx-a6000", "NVIDIA RTX A6000 48GB", MiB(48676), kCtx,
               "48676 MiB = 47.54 GiB (pytorch/ao torchao/prototype/hqq/README.md)",
               86, Sms(84, 86)},
};

struct Alias {
  std::string_view alias;
  std::string_view key;
};
constexpr Alias kAliases[] = {
    {"3060", "rtx3060"},      {"rtx-3060", "rtx3060"},  {"3090", "rtx3090"},      {"rtx-3090", "rtx3090"},
    {"4090", "rtx4090"},      {"rtx-4090", "rtx4090"},  {"h100-sxm", "h100"},     {"a6000", "rtx-a6000"},
    {"v100-16", "v100-16gb"}, {"v100-32", "v100-32gb"}, {"a100-40", "a100-40gb"}, {"a100-80", "a100-80gb"},
    {"h100-80gb", "h100"},  // as a100-80gb is spelt; the SXM card, as "h100" is
};

// Names that match several presets: ask the user to choose instead of guessing.
struct Ambiguous {
  std::string_view name;
  std::string_view candidates;
};
constexpr Ambiguous kAmbiguous[] = {
    {"a100", "a100-40gb or a100-80gb"},
    {"v100", "v100-16gb or v100-32gb"},
};

std::string Lower(std::string_view s) {
  std::string out;
  for (char c : s) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

}  // namespace

CudaDeviceProps ReferenceDeviceProps(int cc) {
  switch (cc) {
    case 70: return Sms(80, 70);    // V100
    case 75: return Sms(40, 75);    // T4
    case 86: return Sms(72, 86);    // A10
    case 89: return Sms(58, 89);    // L4
    case 90: return Sms(132, 90);   // H100 SXM
    case 100: return Sms(148, 100); // B200 (Blackwell datasheet)
    case 120: return Sms(170, 120); // RTX 5090 (Blackwell GB202 whitepaper)
    default: return Sms(108, 80);   // A100
  }
}

std::span<const CardPreset> AllCards() { return kCards; }

const CardPreset* FindCard(std::string_view name, std::string* error) {
  std::string key = Lower(name);
  for (const Alias& a : kAliases) {
    if (key == a.alias) key = a.key;
  }
  for (const CardPreset& card : kCards) {
    if (key == card.key) return &card;
  }
  for (const Ambiguous& a : kAmbiguous) {
    if (key == a.name) {
      *error = "card '" + std::string(name) + "' is ambiguous: use " + std::string(a.candidates);
      return nullptr;
    }
  }
  std::string known;
  for (const CardPreset& card : kCards) known += (known.empty() ? "" : ", ") + std::string(card.key);
  *error = "unknown card '" + std::string(name) + "'; known cards: " + known + " (see `oomguard cards`)";
  return nullptr;
}

}  // namespace oomguard
