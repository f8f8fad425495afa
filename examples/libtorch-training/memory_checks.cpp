// The example's own oomguard: `memory_checks run`, `list`, `explain`, `fit` and `compare` over the
// workload registered in classifier.cpp and the scenario files beside this file.
#include <oomguard/main.h>

int main(int argc, char** argv) {
  // ExitNow: no static destructors at exit (LibTorch's take 0.2 s), once the output is flushed.
  oomguard::ExitNow(oomguard::Main(argc, argv, {.scenario_paths = {EXAMPLE_SCENARIOS_DIR}}));
}
