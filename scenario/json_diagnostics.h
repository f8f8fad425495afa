// Reading JSON objects field by field with precise, one-line error messages; used by the scenario loader.
//
//   std::string error;
//   bool ok = ReadFields(json, JsonPath().Key("loop").Key("eval"), {
//       {"batches", IntField(&eval.batches, 0)},
//       {"no_grad", BoolField(&eval.no_grad)},
//   }, /*allow_null=*/false, &error);
//   // error: "at loop.eval: unknown key \"no_grd\"; did you mean \"no_grad\"? (valid keys: batches, no_grad)"
//   //        "at loop.eval.batches: expected an integer >= 0, got string \"32\""
//
// Error policy: readers return false and set *error to "at PATH: what" (the loader prefixes the file);
// the first error wins. Nothing here throws. Header-only, like the JSON bindings of other plain types.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/did_you_mean.h"
#include "base/json_text.h"

namespace oomguard {

using OrderedJson = nlohmann::ordered_json;

// Where a value sits in a document: "loop.eval.no_grad", "model.layers[2].in"; the root is "top level".
class JsonPath {
 public:
  struct Step {
    std::string key;  // empty for an index step
    int64_t index = -1;
  };
  JsonPath Key(std::string key) const { return With({std::move(key), -1}); }
  JsonPath Index(int64_t index) const { return With({"", index}); }
  JsonPath Append(const JsonPath& tail) const {
    JsonPath joined = *this;
    joined.steps_.insert(joined.steps_.end(), tail.steps_.begin(), tail.steps_.end());
    return joined;
  }
  const std::vector<Step>& steps() const { return steps_; }
  std::string ToString() const {
    if (steps_.empty()) return "top level";
    std::string text;
    for (const Step& step : steps_) {
      if (step.index >= 0) {
        text += '[';  // appended piece by piece: GCC 12's -Wstringop-overflow on "lit" + string&& (PR 88443)
        text += std::to_string(step.index);
        text += ']';
      } else {
        if (!text.empty()) text += '.';
        text += step.key;
      }
    }
    return text;
  }

 private:
  JsonPath With(Step step) const {
    JsonPath longer = *this;
    longer.steps_.push_back(std::move(step));
    return longer;
  }
  std::vector<Step> steps_;
};

// Whether `patch` (an RFC 7386 merge patch) decides the value at `path`: it holds the path, or an array
// or scalar on the way to it (arrays are replaced whole, never merged).
inline bool IsWrittenIn(const OrderedJson& patch, const JsonPath& path) {
  const OrderedJson* at = &patch;
  for (const JsonPath::Step& step : path.steps()) {
    if (step.index >= 0 || !at->is_object()) return true;
    auto it = at->find(step.key);
    if (it == at->end()) return false;
    at = &*it;
  }
  return true;
}

// A value as error messages show it after "got": string "32", 2.5, true, null, an array, an object.
inline std::string DescribeJson(const OrderedJson& value) {
  if (value.is_string()) return "string " + DumpJson(value);
  if (value.is_array()) return value.empty() ? "an empty array" : "an array";
  if (value.is_object()) return value.empty() ? "an empty object" : "an object";
  return DumpJson(value);
}

inline std::string Quoted(const std::string& text) { return DumpJson(OrderedJson(text)); }

// `unknown key "no_grd"; did you mean "no_grad"? (valid keys: batches, no_grad, keep_outputs)`, with
// `what` "key"; the same shape for "variant", "layer kind" and other names. `shown`, when given, is
// listed instead of `valid` (the same names, some with a note: "error:error (any other error)").
inline std::string UnknownNameMessage(const std::string& what, const std::string& name,
                                      const std::vector<std::string>& valid, const std::string& valid_label,
                                      const std::vector<std::string>& shown = {}) {
  const std::string near = ClosestMatch(name, valid);
  return "unknown " + what + " " + Quoted(name) + (near.empty() ? "" : "; did you mean " + Quoted(near) + "?") + " (" +
         valid_label + ": " + JoinNames(shown.empty() ? valid : shown, ", ") + ")";
}

// A dotted name ("optimizer.kind") whose first part is one of `valid`: the table of FORMAT.md writes
// nested keys that way. Gives `unknown key "optimizer.kind": nest it as "optimizer": {"kind": ...}`,
// or "" when `name` is not such a name. `what` as in UnknownNameMessage.
inline std::string DottedNameMessage(const std::string& what, const std::string& name,
                                     const std::vector<std::string>& valid) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos || dot + 1 >= name.size() ||
      std::find(valid.begin(), valid.end(), name.substr(0, dot)) == valid.end()) {
    return "";
  }
  std::string nested, closing;
  size_t start = 0;
  for (size_t end = dot; end != std::string::npos; start = end + 1, end = name.find('.', start)) {
    nested += Quoted(name.substr(start, end - start)) + ": {";
    closing += "}";
  }
  return "unknown " + what + " " + Quoted(name) + ": nest it as " + nested + Quoted(name.substr(start)) + ": ..." +
         closing;
}

inline bool Fail(const JsonPath& path, const std::string& what, std::string* error) {
  *error = "at " + path.ToString() + ": " + what;
  return false;
}

// Reads one value found at `path`; returns false with *error set.
using FieldReader = std::function<bool(const OrderedJson& value, const JsonPath& path, std::string* error)>;
struct Field {
  std::string key;
  FieldReader read;
};

// Reads every key of `object` in file order with the reader of the same name; a key without one is an
// error. With allow_null (a merge patch), null values are skipped: they delete the key, so the default
// applies.
inline bool ReadFields(const OrderedJson& object, const JsonPath& path, const std::vector<Field>& fields,
                       bool allow_null, std::string* error) {
  if (!object.is_object()) return Fail(path, "expected an object, got " + DescribeJson(object), error);
  for (const auto& [key, value] : object.items()) {
    const Field* field = nullptr;
    for (const Field& f : fields) field = f.key == key ? &f : field;
    if (field == nullptr) {
      std::vector<std::string> keys;
      for (const Field& f : fields) keys.push_back(f.key);
      const std::string dotted = DottedNameMessage("key", key, keys);
      return Fail(path, dotted.empty() ? UnknownNameMessage("key", key, keys, "valid keys") : dotted, error);
    }
    if (allow_null && value.is_null()) continue;
    if (!field->read(value, path.Key(key), error)) return false;
  }
  return true;
}

inline FieldReader IntField(int64_t* out, int64_t min) {
  return [out, min](const OrderedJson& value, const JsonPath& path, std::string* error) {
    const bool integer = value.is_number_integer() &&
                         (!value.is_number_unsigned() ||
                          value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    if (!integer || value.get<int64_t>() < min) {
      return Fail(path, "expected an integer >= " + std::to_string(min) + ", got " + DescribeJson(value), error);
    }
    *out = value.get<int64_t>();
    return true;
  };
}

// A number (integer or not) for which `accept` holds; `expected` says which, e.g. "a number in [0, 1)".
inline FieldReader NumberField(double* out, std::string expected, std::function<bool(double)> accept) {
  return [out, expected, accept](const OrderedJson& value, const JsonPath& path, std::string* error) {
    if (!value.is_number() || !std::isfinite(value.get<double>()) || !accept(value.get<double>())) {
      return Fail(path, "expected " + expected + ", got " + DescribeJson(value), error);
    }
    *out = value.get<double>();
    return true;
  };
}

inline FieldReader BoolField(bool* out) {
  return [out](const OrderedJson& value, const JsonPath& path, std::string* error) {
    if (!value.is_boolean()) return Fail(path, "expected true or false, got " + DescribeJson(value), error);
    *out = value.get<bool>();
    return true;
  };
}

// A non-empty string.
inline FieldReader StringField(std::string* out) {
  return [out](const OrderedJson& value, const JsonPath& path, std::string* error) {
    if (!value.is_string() || value.get<std::string>().empty()) {
      return Fail(path, "expected a non-empty string, got " + DescribeJson(value), error);
    }
    *out = value.get<std::string>();
    return true;
  };
}

// One of `values`; `what` names the thing in messages: unknown `what` "mae"; did you mean "mse"? ...
// `shown`, when given, lists the values in messages instead (see UnknownNameMessage).
inline FieldReader EnumField(std::string* out, std::string what, std::vector<std::string> values,
                             std::vector<std::string> shown = {}) {
  return [out, what, values, shown](const OrderedJson& value, const JsonPath& path, std::string* error) {
    if (!value.is_string()) {
      return Fail(path,
                  "expected one of " + JoinNames(shown.empty() ? values : shown, ", ") + ", got " + DescribeJson(value),
                  error);
    }
    const std::string text = value.get<std::string>();
    for (const std::string& v : values) {
      if (v == text) {
        *out = text;
        return true;
      }
    }
    return Fail(path, UnknownNameMessage(what, text, values, "valid values", shown), error);
  };
}

// One of `values` of a closed set, spelt as Name() spells it, read with Parse() (model/enum_names.h;
// found by argument-dependent lookup: the enums and VariantOutcome). Messages as EnumField's.
template <typename Value>
FieldReader NamedField(Value* out, std::string what, const std::vector<Value>& values,
                       std::vector<std::string> shown = {}) {
  std::vector<std::string> names;
  for (const Value& v : values) names.emplace_back(Name(v));
  return [out, what, names, shown](const OrderedJson& value, const JsonPath& path, std::string* error) {
    std::string text;
    if (!EnumField(&text, what, names, shown)(value, path, error)) return false;
    const bool parsed = Parse(text, out);
    OOMGUARD_CHECK(parsed) << "'" << text << "' is a name of the set but does not parse";
    return true;
  };
}

}  // namespace oomguard
