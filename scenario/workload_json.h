// JSON bindings of a workload scenario's keys (scenario.h VariantSpec.workload and .knobs): the
// top-level "workload" (a registered workload's name) and "knobs" (named scalars it reads), as the
// base and each variant's merge patch write them, and the rule that a workload scenario writes no
// layer-list keys.
//
//   {"workload": "mlp_adam", "knobs": {"batch": 64, "eval_no_grad": true}, "loop": {"iterations": 3}}
//
// Error policy as in json_diagnostics.h. Header-only: included by the loader and variant_resolution.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/knobs.h"
#include "scenario/json_diagnostics.h"

namespace oomguard {

inline FieldReader WorkloadNameField(std::string* out) {
  return [out](const OrderedJson& value, const JsonPath& path, std::string* error) {
    if (!value.is_string() || !IsKnobOrWorkloadName(value.get<std::string>())) {
      return Fail(path,
                  "expected the name a workload is registered under, such as \"mlp_adam\", got " + DescribeJson(value),
                  error);
    }
    *out = value.get<std::string>();
    return true;
  };
}

// An object of name -> true/false, a whole number, another number or a string.
inline FieldReader KnobsField(Knobs* out) {
  return [out](const OrderedJson& value, const JsonPath& path, std::string* error) {
    if (!value.is_object()) {
      return Fail(path, "expected an object of knobs such as {\"batch\": 64}, got " + DescribeJson(value), error);
    }
    Knobs knobs;
    for (const auto& [name, v] : value.items()) {
      const JsonPath at = path.Key(name);
      if (!IsKnobOrWorkloadName(name)) {
        return Fail(at, "a knob's name is letters, digits, '_', '.' and '-', starting with a letter or '_'", error);
      }
      if (v.is_boolean()) {
        knobs[name] = v.get<bool>();
      } else if (v.is_number_integer() &&
                 (!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX))) {
        knobs[name] = v.get<int64_t>();
      } else if (v.is_number()) {
        knobs[name] = v.get<double>();
      } else if (v.is_string()) {
        knobs[name] = v.get<std::string>();
      } else {
        return Fail(at, "expected a boolean, a number or a string, got " + DescribeJson(v), error);
      }
    }
    *out = std::move(knobs);
    return true;
  };
}

// Where a variant's merged configuration breaks the workload rule: a workload scenario writes no
// model, data or pitfalls and of loop only iterations (its code is its loop); knobs need a workload.
// Returns the path of the offending key (relative to the configuration) and the message.
struct WorkloadRuleProblem {
  JsonPath path;
  std::string message;
};
inline std::optional<WorkloadRuleProblem> FindWorkloadRuleProblem(const OrderedJson& merged) {
  if (!merged.contains("workload")) {
    if (merged.contains("knobs")) {
      return WorkloadRuleProblem{JsonPath().Key("knobs"),
                                 "knobs are read by a registered workload: name it with \"workload\""};
    }
    return std::nullopt;
  }
  for (const char* key : {"model", "data", "pitfalls"}) {
    if (merged.contains(key)) {
      return WorkloadRuleProblem{JsonPath().Key(key),
                                 std::string("a workload scenario builds its own model, data and loop: \"") + key +
                                     "\" does not apply (give the workload knobs instead)"};
    }
  }
  // Note [A workload's own ranks] (workload/user_workload_run.h): its distributed code is its own.
  if (merged.contains("parallel") && merged["parallel"].is_object()) {
    const OrderedJson& parallel = merged["parallel"];
    for (const auto& [key, v] : parallel.items()) {
      if (key == "world" || key == "rank") continue;
      return WorkloadRuleProblem{JsonPath().Key("parallel").Key(key),
                                 "a workload runs its own distributed code: of \"parallel\" it takes only \"world\" "
                                 "and \"rank\" (its collectives go through ctx.ProcessGroup())"};
    }
    const int64_t world = parallel.value("world", int64_t{1}), rank = parallel.value("rank", int64_t{0});
    if (rank >= world) {
      return WorkloadRuleProblem{JsonPath().Key("parallel").Key("rank"),
                                 "rank " + std::to_string(rank) + " is not a rank of world " + std::to_string(world) +
                                     " (ranks are 0 .. world - 1)"};
    }
  }
  if (merged.contains("loop") && merged["loop"].is_object()) {
    for (const auto& [key, v] : merged["loop"].items()) {
      if (key == "iterations") continue;
      const std::string hint = key == "autocast" ? " (for mixed precision, wrap its forward in ctx.Autocast(dtype))"
                               : key == "clip_grad_norm" ? " (call torch::nn::utils::clip_grad_norm_ in its code)"
                                                         : "";
      return WorkloadRuleProblem{JsonPath().Key("loop").Key(key),
                                 "a workload runs its own loop: of \"loop\" it takes only \"iterations\"" + hint};
    }
  }
  return std::nullopt;
}

}  // namespace oomguard
