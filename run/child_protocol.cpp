#include "run/child_protocol.h"

#include <unistd.h>

#include <charconv>

#include "base/check.h"

namespace oomguard {
namespace {

// Note [One list of fields]: the binding must name every member, so a new one fails to compile here.
template <class Request, class Visit>
void ForEachField(Request& request, Visit&& visit) {
  auto& [scenario_file, variant, variant_file, backend, card, cap, context, inject, iterations, snapshot_dir,
         snapshot_all, model_cuda, verdict, kernels, alloc_conf, diagnose, out_path, parent_pid, ranks_store, rank,
         ranks_timeout_ms] = request;
  visit("--scenario", scenario_file);
  visit("--variant", variant);
  visit("--variant-file", variant_file);
  visit("--backend", backend);
  visit("--out", out_path);
  visit("--card", card);
  visit("--cap", cap);
  visit("--context", context);
  visit("--inject", inject);
  visit("--iterations", iterations);
  visit("--snapshot-dir", snapshot_dir);
  visit("--snapshot-all", snapshot_all);
  visit("--model-cuda", model_cuda);
  visit("--verdict", verdict);
  visit("--kernels", kernels);
  visit("--alloc-conf", alloc_conf);
  visit("--diagnose", diagnose);
  visit("--parent-pid", parent_pid);
  visit("--ranks-store", ranks_store);
  visit("--rank", rank);
  visit("--ranks-timeout-ms", ranks_timeout_ms);
}

struct ArgvWriter {
  std::vector<std::string>* argv;

  void operator()(const char* flag, const std::string& value) const {
    if (!value.empty()) argv->insert(argv->end(), {flag, value});
  }
  void operator()(const char* flag, const std::vector<std::string>& values) const {
    for (const std::string& value : values) argv->insert(argv->end(), {flag, value});
  }
  void operator()(const char* flag, const int64_t& value) const {
    if (value != 0) argv->insert(argv->end(), {flag, std::to_string(value)});
  }
  void operator()(const char* flag, const bool& value) const {
    if (value) argv->push_back(flag);
  }
};

// Reads the field whose flag is args[*at], if any, advancing *at past its value.
struct ArgvReader {
  ArgvReader(const std::vector<std::string>& args, size_t* at) : args(args), at(at) {}

  const std::vector<std::string>& args;
  size_t* at;
  bool matched = false;
  std::string error;

  bool Take(const char* flag, std::string* value) {
    if (matched || args[*at] != flag) return false;
    matched = true;
    if (*at + 1 >= args.size()) {
      error = std::string(flag) + " needs a value";
      return false;
    }
    *value = args[++*at];
    return true;
  }
  void operator()(const char* flag, std::string& value) { Take(flag, &value); }
  void operator()(const char* flag, std::vector<std::string>& values) {
    if (std::string value; Take(flag, &value)) values.push_back(value);
  }
  void operator()(const char* flag, int64_t& value) {
    std::string text;
    if (!Take(flag, &text)) return;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
      error = std::string(flag) + ": '" + text + "' is not a whole number";
    }
  }
  void operator()(const char* flag, bool& value) {
    if (matched || args[*at] != flag) return;
    matched = true;
    value = true;
  }
};

}  // namespace

MeasureRequest MeasureRequestFor(const RunOptions& options, const std::string& scenario_file,
                                 const std::string& variant, const std::string& backend, const std::string& scratch_dir,
                                 const std::string& out_path) {
  MeasureRequest r;
  r.scenario_file = scenario_file;
  r.variant = variant;
  r.backend = backend;
  r.card = options.card;
  r.cap = options.cap;
  r.context = options.context;
  r.inject = options.inject;
  r.iterations = options.iterations;
  if (!options.snapshot_dir.empty()) {
    r.snapshot_dir = scratch_dir;
    r.snapshot_all = true;
  }
  r.model_cuda = options.model_cuda;
  r.verdict = options.verdict == kVerdictReserved ? "" : options.verdict;
  r.kernels = options.kernels;
  CachingAllocatorConfig config;
  std::string error;
  OOMGUARD_CHECK(ResolveAllocConf(options.alloc_conf, &r.alloc_conf, &config, &error))
      << "the plan checks the allocator config before any child: " << error;
  r.diagnose = options.diagnose;
  r.out_path = out_path;
  r.parent_pid = getpid();
  return r;
}

std::vector<std::string> ChildArgv(const std::string& self_exe, const MeasureRequest& request) {
  OOMGUARD_CHECK(!request.scenario_file.empty() && !request.variant.empty() && !request.backend.empty() &&
                 !request.out_path.empty())
      << "a measure request needs a scenario file, a variant, a backend and an output path";
  std::vector<std::string> argv = {self_exe, kMeasureCommand};
  ForEachField(request, ArgvWriter{&argv});
  return argv;
}

bool ParseMeasureRequest(const std::vector<std::string>& args, MeasureRequest* request, std::string* error) {
  *request = MeasureRequest{};
  for (size_t at = 0; at < args.size(); ++at) {
    ArgvReader reader(args, &at);
    ForEachField(*request, reader);
    if (!reader.matched) {
      *error = "unknown argument '" + args[at] + "'";
      return false;
    }
    if (!reader.error.empty()) {
      *error = reader.error;
      return false;
    }
  }
  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"--scenario", &request->scenario_file},
                                    {"--variant", &request->variant},
                                    {"--backend", &request->backend},
                                    {"--out", &request->out_path}}) {
    if (value->empty()) {
      *error = std::string("missing ") + flag;
      return false;
    }
  }
  return true;
}

}  // namespace oomguard
