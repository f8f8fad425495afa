#include "cli/run_flags.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "base/did_you_mean.h"
#include "model/backend.h"

namespace oomguard {

std::vector<std::string> BackendChoices() {
  std::vector<std::string> choices = AllNames<Backend>();
  choices.push_back("auto");
  return choices;
}

std::string BackendChoicesText() { return JoinNames(AllNames<Backend>(), ", ") + ", or auto"; }

void AddRunFlags(CLI::App* app, RunOptions* o) {
  app->add_option("--backend", o->backend, BackendChoicesText() + " (default): cuda when a GPU is visible, else cpu")
      ->check(CLI::IsMember(BackendChoices()));
  CLI::Option* card = app->add_option("--card", o->card, "Simulate this card (see `oomguard cards`; default t4)");
  CLI::Option* cap = app->add_option("--cap", o->cap, "Cap tensor memory at SIZE, e.g. 12GiB, 15.5GB, 1e9");
  card->excludes(cap);
  app->add_option("--context", o->context, "Override the modelled CUDA context of --card");
  app->add_option("--inject", o->inject,
                  "Inject allocation failures, e.g. nth=5, min-size=64MiB, p=0.01,seed=7, phase=backward,nth=2; "
                  "rank=R,nth=5 in rank R of a parallel variant only (without rank=: every rank)");
  app->add_option("--iterations", o->iterations, "Training iterations per variant (default: the scenario's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  CLI::Option* snapshot_dir = app->add_option(
      "--snapshot-dir", o->snapshot_dir,
      "Record allocations; write a memory_viz snapshot (pickle) of each failing or OOM variant into DIR");
  app->add_flag("--snapshot-all", o->snapshot_all, "With --snapshot-dir: a snapshot of every variant")
      ->needs(snapshot_dir);
  AddVerdictFlags(app, &o->verdict, &o->alloc_conf);
  app->add_flag("--model-cuda", o->model_cuda,
                "With --verdict allocated: still predict the CUDA caching allocator's peaks, retries and OOMs");
  AddKernelsFlag(app, &o->kernels);
  app->add_flag("--diagnose", o->diagnose,
                "Measure the fix of each pitfall found: rerun the variant with it applied (peak, live after)");
  const char* spawn = std::getenv("OOMGUARD_SPAWN_CHILDREN");
  o->spawn_children = spawn != nullptr && *spawn != '\0' && std::string(spawn) != "0";
}

void AddVerdictFlags(CLI::App* app, std::string* verdict, std::optional<std::string>* alloc_conf) {
  app->add_option("--verdict", *verdict,
                  "On cpu and meta, what the cap judges: reserved (default: the CUDA caching allocator's segments, "
                  "as on the GPU) or allocated (the tensors' bytes alone)")
      ->check(CLI::IsMember({kVerdictReserved, kVerdictAllocated}));
  app->add_option("--alloc-conf", *alloc_conf,
                  "The caching allocator's settings, in PYTORCH_ALLOC_CONF's syntax, e.g. expandable_segments:True "
                  "(default: the PYTORCH_ALLOC_CONF environment variable)");
}

void AddKernelsFlag(CLI::App* app, std::string* kernels) {
  app->add_option("--kernels", *kernels,
                  "With --backend meta: mirror the allocations of cpu's kernels (default) or of PyTorch's CUDA "
                  "kernels at the card's compute capability (cuda)")
      ->check(CLI::IsMember({kKernelsCpu, kKernelsCuda}));
}

CLI::Validator FiniteRange(double min, double max) {
  std::ostringstream range;
  range << "[" << min << ", " << max << "]";
  const std::string text = range.str();
  return CLI::Validator(
      [min, max, text](std::string& input) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(input.c_str(), &end);
        if (input.empty() || *end != '\0' || !std::isfinite(value) || value < min || value > max) {
          return "expected a number in " + text + ", got '" + input + "'";
        }
        return "";
      },
      "NUMBER in " + text);
}

void AddTimeoutFlag(CLI::App* app, double* seconds) {
  app->add_option("--timeout", *seconds, "Seconds a variant (run) or a trial (fit) may take before it is stopped")
      ->check(FiniteRange(1.0, 86400.0));
}

void AddShardFlag(CLI::App* app, RunOptions* o) {
  app->add_option("--shard", o->shard,
                  "Run only part INDEX of COUNT (1-based, e.g. 2/3) of the scenario files, for a CI matrix; "
                  "without it, GTEST_SHARD_INDEX and GTEST_TOTAL_SHARDS shard the run");
  o->gtest_sharding = true;
}

}  // namespace oomguard
