// The example's own oomguard: `memory_checks run`, `list`, `explain`, `fit` and `compare` over the
// workload registered in classifier.cpp and the scenario files beside this file.
#include <oomguard/main.h>

int main(int argc, char** argv) { return oomguard::Main(argc, argv, {.scenario_paths = {EXAMPLE_SCENARIOS_DIR}}); }
