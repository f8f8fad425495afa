#include "workload/workload_registry.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "allocators/install.h"
#include "base/did_you_mean.h"
#include "model/knobs.h"

namespace oomguard {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, WorkloadFunction> functions;
};

// A function-local static: registrations run during static initialisation, in any order.
Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

}  // namespace

bool RegisterWorkload(const std::string& name, WorkloadFunction function) {
  if (!IsKnobOrWorkloadName(name) || !function) return false;
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.functions.emplace(name, std::move(function)).second;
}

std::vector<std::string> RegisteredWorkloads() {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, function] : r.functions) names.push_back(name);
  return names;
}

const WorkloadFunction* FindWorkload(const std::string& name) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.functions.find(name);
  return it == r.functions.end() ? nullptr : &it->second;  // map nodes never move
}

bool WorkloadsRegistered(const Scenario& scenario, std::string* error) {
  for (const VariantSpec& v : scenario.variants) {
    if (v.workload.empty() || FindWorkload(v.workload) != nullptr) continue;
    const std::vector<std::string> names = RegisteredWorkloads();
    const std::string near = ClosestMatch(v.workload, names);
    // A name with no near match may be defined in a static library: the linker keeps an object file of
    // one only when something references it, and OOMGUARD_WORKLOAD's registration is referenced by nothing.
    const std::string static_library =
        near.empty() ? "; if OOMGUARD_WORKLOAD(" + v.workload +
                           ") is in a static library, the linker dropped it: link that library whole, "
                           "target_link_libraries(<program> PRIVATE \"$<LINK_LIBRARY:WHOLE_ARCHIVE,<library>>\")"
                     : "";
    *error = "workload '" + v.workload + "' is not registered in this program" +
             (near.empty() ? "" : "; did you mean '" + near + "'?") +
             (names.empty() ? " (no workloads are registered: run the scenario with the program that registers it, "
                              "built with oomguard::Main)"
                            : " (registered: " + JoinNames(names, ", ") + ")") +
             static_library;
    return false;
  }
  return true;
}

namespace internal {

bool RegisterWorkloadOrDie(const char* name, void (*function)(Context&)) {
  if (RegisterWorkload(name, function)) return true;
  std::fprintf(stderr, "oomguard: OOMGUARD_WORKLOAD(%s): a workload of that name is already registered\n", name);
  std::abort();
}

bool InstallAllocators() {
  InstallTrackingAllocators();
  return true;
}

}  // namespace internal
}  // namespace oomguard
