# Each card preset's memory in MiB, as a cuda scenario test asks CTest for it (RESOURCE_GROUPS
# "gpus:<MiB>", oomguardScenarios.cmake): the total CUDA reports (allocators/cards.cpp), rounded up.
# The CTest Package.CardTableMatchesOomguardCards checks it against `oomguard cards --json`;
# tests/package/card_table.cmake writes it.
# --- generated below this line ---
set(OOMGUARD_CARD_MIB
  t4=15095
  l4=22479
  a10=22516
  a10g=22587
  rtx3060=12032
  rtx3090=24155
  rtx4090=24211
  v100-16gb=16160
  v100-32gb=32511
  a100-40gb=40340
  a100-80gb=81158
  h100=81106
  h100-pcie=81008
  h200=143156
  l40s=45590
  rtx-a6000=48676
)
