// The "diagnoses" expectation of a variant: the kinds the detectors must find (diagnose/detectors.h),
// exactly, in any order; [] expects none.
//
//   "expect": {"pitfall": {"diagnoses": ["eval-keeps-graph"]}, "fixed": {"diagnoses": []}}
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include "model/diagnosis.h"
#include "scenario/json_diagnostics.h"

namespace oomguard {

inline FieldReader DiagnosesField(std::optional<std::vector<DiagnosisKind>>* out) {
  return [out](const OrderedJson& value, const JsonPath& path, std::string* error) {
    if (!value.is_array()) {
      return Fail(path,
                  "expected an array of diagnosis kinds such as [\"eval-keeps-graph\"] ([] for none), got " +
                      DescribeJson(value),
                  error);
    }
    std::vector<DiagnosisKind> kinds;
    for (size_t i = 0; i < value.size(); ++i) {
      DiagnosisKind kind;
      if (!NamedField(&kind, "diagnosis kind", AllValues<DiagnosisKind>())(
              value[i], path.Index(static_cast<int64_t>(i)), error)) {
        return false;
      }
      if (std::find(kinds.begin(), kinds.end(), kind) != kinds.end()) {
        return Fail(path.Index(static_cast<int64_t>(i)), "\"" + std::string(Name(kind)) + "\" is listed twice", error);
      }
      kinds.push_back(kind);
    }
    *out = std::move(kinds);
    return true;
  };
}

}  // namespace oomguard
