// The "checks" of a scenario (relations between variants) and of a variant's expectation: each a
// check expression, or an object that says whose kernels its arithmetic is for (Note [Whose kernels a
// check is for], model/scenario.h):
//
//   "checks": ["pitfall.peak >= 2 * fixed.peak",
//              {"kernels": "cpu", "check": "2 * bf16.peak - fp32.peak == 4096"}]
//
// Each expression is parsed here, so that a bad one is an error at load time naming its path
// (checks[1].check), and each variant a relation names must exist.
#pragma once

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "model/scenario.h"
#include "scenario/check_expression.h"
#include "scenario/json_diagnostics.h"

namespace oomguard {

// One check: an expression, or {"kernels": K, "check": expression} for one kernels' arithmetic (Note
// [Whose kernels a check is for], model/scenario.h).
inline bool ReadCheck(const OrderedJson& value, const JsonPath& path, bool relation_mode,
                      const std::vector<std::string>& variants, std::vector<ScenarioCheck>* out, std::string* error) {
  const std::string example = relation_mode ? "\"pitfall.peak >= 2 * fixed.peak\"" : "\"peak <= 12MiB\"";
  ScenarioCheck check;
  JsonPath expression_path = path;
  if (value.is_string()) {
    check.expression = value.get<std::string>();
  } else if (value.is_object()) {
    const std::vector<std::string> kernels(std::begin(kCheckKernels), std::end(kCheckKernels));
    if (!ReadFields(value, path,
                    {{"kernels", EnumField(&check.kernels, "kernels", kernels)},
                     {"check",
                      [&](const OrderedJson& v, const JsonPath& p, std::string* err) {
                        if (v.is_string()) check.expression = v.get<std::string>();
                        return v.is_string() ||
                               Fail(p, "expected a check expression such as " + example + ", got " + DescribeJson(v),
                                    err);
                      }}},
                    false, error)) {
      return false;
    }
    if (!value.contains("check")) return Fail(path, "missing required key \"check\" (a check expression)", error);
    if (!value.contains("kernels")) {
      return Fail(path, "missing required key \"kernels\" (whose kernels the check's arithmetic is for: cpu or cuda)",
                  error);
    }
    expression_path = path.Key("check");
  } else {
    return Fail(path,
                "expected a check expression such as " + example + ", or {\"kernels\": \"cpu\", \"check\": " + example +
                    "}, got " + DescribeJson(value),
                error);
  }
  CheckExpression parsed;
  std::string check_error;
  if (!ParseCheckExpression(check.expression, relation_mode, &parsed, &check_error)) {
    return Fail(expression_path, check_error, error);
  }
  for (const std::string& variant : ReferencedVariants(parsed)) {
    if (std::find(variants.begin(), variants.end(), variant) == variants.end())
      return Fail(expression_path, UnknownNameMessage("variant", variant, variants, "variants"), error);
  }
  out->push_back(std::move(check));
  return true;
}

inline bool ReadChecks(const OrderedJson& value, const JsonPath& path, bool relation_mode,
                       const std::vector<std::string>& variants, std::vector<ScenarioCheck>* out, std::string* error) {
  const char* example = relation_mode ? "\"pitfall.peak >= 2 * fixed.peak\"" : "\"peak <= 12MiB\"";
  if (!value.is_array())
    return Fail(
        path,
        "expected an array of check expressions such as [" + std::string(example) + "], got " + DescribeJson(value),
        error);
  for (size_t i = 0; i < value.size(); ++i) {
    if (!ReadCheck(value[i], path.Index(static_cast<int64_t>(i)), relation_mode, variants, out, error)) return false;
  }
  return true;
}

}  // namespace oomguard
