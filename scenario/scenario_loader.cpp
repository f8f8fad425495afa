#include "scenario/scenario_loader.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "allocators/cards.h"
#include "base/byte_size.h"
#include "base/did_you_mean.h"
#include "base/files.h"
#include "base/input_limits.h"
#include "base/json_text.h"
#include "model/backend.h"
#include "scenario/check_expression.h"
#include "scenario/checks_field.h"
#include "scenario/diagnoses_field.h"
#include "scenario/json_diagnostics.h"
#include "scenario/json_document.h"
#include "scenario/text_fields.h"
#include "scenario/variant_json.h"
#include "scenario/variant_resolution.h"

namespace oomguard {
namespace {

using Json = OrderedJson;

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool IsName(const std::string& text, const char* first, const char* rest) {
  return !text.empty() && std::strchr(first, text[0]) != nullptr && text.find_first_not_of(rest) == std::string::npos;
}
constexpr const char* kLowerDigits = "abcdefghijklmnopqrstuvwxyz0123456789";
constexpr const char* kLowerUnderscore = "abcdefghijklmnopqrstuvwxyz_";
constexpr const char* kIdentifierChars = "abcdefghijklmnopqrstuvwxyz0123456789_";

// --- The scenario's own keys ---

// A name past limits::kMaxNameChars: the files named after it could never be written.
std::string NameTooLong(const std::string& what, size_t chars) {
  return what + " of " + std::to_string(chars) + " characters, more than " + std::to_string(limits::kMaxNameChars) +
         " (the limit for scenario and variant names, which name the baseline and snapshot files)";
}

FieldReader NameField(std::string* out) {
  return [out](const Json& value, const JsonPath& path, std::string* error) {
    if (!value.is_string() ||
        !IsName(value.get<std::string>(), kLowerDigits, "abcdefghijklmnopqrstuvwxyz0123456789_-")) {
      return Fail(path,
                  "expected a name of lowercase letters, digits, '-' and '_' that starts with a letter or digit, "
                  "such as \"forgotten-no-grad\", got " +
                      DescribeJson(value),
                  error);
    }
    if (const size_t chars = value.get<std::string>().size(); chars > limits::kMaxNameChars) {
      return Fail(path, NameTooLong("a name", chars), error);
    }
    *out = value.get<std::string>();
    return true;
  };
}

FieldReader BackendsField(std::vector<std::string>* out) {
  return [out](const Json& value, const JsonPath& path, std::string* error) {
    if (!value.is_array() || value.empty()) {
      return Fail(path, "expected an array of backends such as [\"cpu\", \"meta\"], got " + DescribeJson(value), error);
    }
    out->clear();
    for (size_t i = 0; i < value.size(); ++i) {
      std::string backend;
      const JsonPath at = path.Index(static_cast<int64_t>(i));
      if (!EnumField(&backend, "backend", AllNames<Backend>())(value[i], at, error)) return false;
      if (Contains(*out, backend)) return Fail(at, "backend " + Quoted(backend) + " is listed twice", error);
      out->push_back(backend);
    }
    return true;
  };
}

FieldReader CardField(std::string* out) {
  return [out](const Json& value, const JsonPath& path, std::string* error) {
    std::string card_error;
    if (!value.is_string()) return Fail(path, "expected a card name such as \"t4\", got " + DescribeJson(value), error);
    if (FindCard(value.get<std::string>(), &card_error) == nullptr) return Fail(path, card_error, error);
    *out = value.get<std::string>();
    return true;
  };
}

FieldReader CapField(std::string* out) {
  return [out](const Json& value, const JsonPath& path, std::string* error) {
    if (!value.is_string() && !value.is_number_integer()) {
      return Fail(path, "expected a size such as \"12GiB\", got " + DescribeJson(value), error);
    }
    const std::string text = value.is_string() ? value.get<std::string>() : DumpJson(value);
    int64_t bytes = 0;
    std::string size_error;
    if (!ParseByteSize(text, &bytes, &size_error)) return Fail(path, size_error, error);
    if (bytes == 0) return Fail(path, "expected a size > 0, got " + DescribeJson(value), error);
    *out = text;
    return true;
  };
}

using Patches = std::vector<std::pair<std::string, Json>>;

FieldReader VariantsField(Patches* out) {
  return [out](const Json& value, const JsonPath& path, std::string* error) {
    if (!value.is_object() || value.empty()) {
      return Fail(path,
                  "expected an object of named variants such as {\"pitfall\": {}, \"fixed\": {...}}, got " +
                      DescribeJson(value),
                  error);
    }
    if (value.size() > static_cast<size_t>(limits::kMaxVariants)) {
      return Fail(path,
                  std::to_string(value.size()) + " variants, more than " + std::to_string(limits::kMaxVariants) +
                      " (the limit for one scenario; split it into several files)",
                  error);
    }
    for (const auto& [name, patch] : value.items()) {
      if (!IsName(name, kLowerUnderscore, kIdentifierChars)) {
        return Fail(path,
                    "invalid variant name " + Quoted(name) +
                        ": use lowercase letters, digits and '_', not starting with a digit",
                    error);
      }
      if (name.size() > limits::kMaxNameChars) return Fail(path, NameTooLong("a variant name", name.size()), error);
      if (!patch.is_object()) {
        return Fail(path.Key(name),
                    "expected an object (a merge patch over the base; {} runs the base as it is), "
                    "got " +
                        DescribeJson(patch),
                    error);
      }
      VariantSpec scratch;
      if (!ReadFields(patch, path.Key(name), VariantConfigFields(&scratch, /*patch=*/true), true, error)) return false;
      out->emplace_back(name, patch);
    }
    return true;
  };
}

// Stores a value to read once the variants are known.
FieldReader Later(const Json** out) {
  return [out](const Json& value, const JsonPath&, std::string*) {
    *out = &value;
    return true;
  };
}

FieldReader OutcomeField(VariantOutcome* out) {
  std::vector<std::string> shown = AllOutcomeNames();
  shown.back() += " (any other error)";  // error:error, the last category (model/outcome.h)
  return NamedField(out, "outcome", AllOutcomes(), shown);
}

bool ReadExpect(const Json& value, const JsonPath& path, const std::vector<std::string>& variants, Scenario* out,
                std::string* error) {
  if (!value.is_object())
    return Fail(path, "expected an object of expectations by variant name, got " + DescribeJson(value), error);
  for (const auto& [name, expectation] : value.items()) {
    if (!Contains(variants, name)) {
      const std::string dotted = DottedNameMessage("variant", name, variants);  // "fixed.outcome"
      return Fail(path, dotted.empty() ? UnknownNameMessage("variant", name, variants, "variants") : dotted, error);
    }
    VariantExpectation& e = out->expectations[name];
    const JsonPath at = path.Key(name);
    const FieldReader checks = [&](const Json& v, const JsonPath& p, std::string* err) {
      return ReadChecks(v, p, /*relation_mode=*/false, variants, &e.checks, err);
    };
    const FieldReader leak = [&](const Json& v, const JsonPath& p, std::string* err) {
      e.leak_stated = true;
      return BoolField(&e.leak)(v, p, err);
    };
    const FieldReader xfail = [&](const Json& v, const JsonPath& p, std::string* err) {
      std::string reason;
      if (!StringField(&reason)(v, p, err)) return false;
      e.xfail = reason;
      return true;
    };
    if (!ReadFields(expectation, at,
                    {{"outcome", OutcomeField(&e.outcome)},
                     {"leak", leak},
                     {"checks", checks},
                     {"xfail", xfail},
                     {"diagnoses", DiagnosesField(&e.diagnoses)}},
                    false, error)) {
      return false;
    }
  }
  return true;
}

FieldReader EstimateField(std::optional<EstimateSpec>* out) {
  return [out](const Json& value, const JsonPath& path, std::string* error) {
    if (!value.is_object()) {
      return Fail(path, "expected an object such as {\"activation_factor\": 34}, got " + DescribeJson(value), error);
    }
    EstimateSpec spec;
    const std::vector<Field> fields = {
        {"activation_factor", NumberField(&spec.activation_factor, "a number > 0", [](double v) { return v > 0; })}};
    if (!ReadFields(value, path, fields, false, error)) return false;
    if (!value.contains("activation_factor")) {
      return Fail(path,
                  "missing required key \"activation_factor\" (activations ~ batch x seq x hidden x layers x "
                  "dtype bytes x activation_factor)",
                  error);
    }
    *out = spec;
    return true;
  };
}

bool LoadDocument(const Json& root, Scenario* out, std::string* error) {
  if (!root.is_object()) return Fail(JsonPath(), "expected an object, got " + DescribeJson(root), error);
  VariantSpec base_spec;  // only to validate the base where it is written
  Patches patches;
  const Json* expect = nullptr;
  const Json* checks = nullptr;
  std::vector<Field> fields = {{"name", NameField(&out->name)},    {"summary", SummaryField(&out->summary)},
                               {"teach", TeachField(&out->teach)}, {"backends", BackendsField(&out->backends)},
                               {"card", CardField(&out->card)},    {"cap", CapField(&out->cap)}};
  for (Field& field : VariantConfigFields(&base_spec, /*patch=*/false)) fields.push_back(std::move(field));
  fields.push_back({"variants", VariantsField(&patches)});
  fields.push_back({"expect", Later(&expect)});
  fields.push_back({"checks", Later(&checks)});
  fields.push_back({"estimate", EstimateField(&out->estimate)});
  if (!ReadFields(root, JsonPath(), fields, false, error)) return false;
  if (!root.contains("name"))
    return Fail(JsonPath(), "missing required key \"name\" (a name such as \"forgotten-no-grad\")", error);
  if (!root.contains("summary"))
    return Fail(JsonPath(), "missing required key \"summary\" (one line: what the scenario shows)", error);
  if (!root.contains("variants")) {
    return Fail(JsonPath(),
                "missing required key \"variants\" (named merge patches over the base, e.g. {\"base\": {}})", error);
  }
  if (root.contains("card") && root.contains("cap"))
    return Fail(JsonPath().Key("cap"), "give either card or cap, not both", error);

  Json base = Json::object();
  for (const char* key : kVariantKeys) {
    if (root.contains(key)) base[key] = root[key];
  }
  std::vector<std::string> names;
  for (const auto& [name, patch] : patches) {
    VariantSpec spec;
    if (!ResolveVariant(*out, base, name, patch, &spec, error)) return false;
    out->variants.push_back(std::move(spec));
    out->expectations[name] = VariantExpectation();
    names.push_back(name);
  }
  if (expect != nullptr && !ReadExpect(*expect, JsonPath().Key("expect"), names, out, error)) return false;
  return checks == nullptr ||
         ReadChecks(*checks, JsonPath().Key("checks"), /*relation_mode=*/true, names, &out->checks, error);
}

}  // namespace

bool LoadScenarioText(const std::string& json_text, const std::string& file_label, Scenario* out, std::string* error) {
  try {
    Json root;
    if (!ParseJsonDocument(json_text, file_label, &root, error)) return false;
    Scenario scenario;
    scenario.file = file_label;
    if (!LoadDocument(root, &scenario, error)) {
      *error = file_label + ": " + *error;
      return false;
    }
    *out = std::move(scenario);
    return true;
  } catch (const std::exception& e) {  // a bug here must not take the catalog down: UNRESOLVED, go on
    *error = file_label + ": internal error while loading: " + e.what();
    return false;
  }
}

// Folders are walked with POSIX calls: Note [No std::filesystem] (base/files.h).

bool LoadScenarioFile(const std::string& path, Scenario* out, std::string* error) {
  struct stat info {};
  if (stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    *error = path + ": is a folder, not a scenario file";
    return false;
  }
  std::string text;
  if (!ReadFile(path, &text, error)) return false;
  return LoadScenarioText(text, path, out, error);  // an empty file reads as "", which the parser reports
}

bool FindScenarioFiles(const std::vector<std::string>& paths, std::vector<std::string>* files, std::string* error) {
  std::vector<std::string> found;
  for (const std::string& path : paths) {
    struct stat info {};
    if (stat(path.c_str(), &info) != 0) {
      *error = path + ": no such file or folder";
      return false;
    }
    if (!S_ISDIR(info.st_mode)) {
      found.push_back(path);
      continue;
    }
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) {
      *error = path + ": cannot list: " + std::strerror(errno);
      return false;
    }
    const std::string prefix = path.back() == '/' ? path : path + "/";
    // Every entry named *.json is taken, whatever it is: one that is not a readable file (a dangling
    // link, a folder, a FIFO) then fails to load and shows as UNRESOLVED, rather than leaving CI unseen.
    while (const dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) found.push_back(prefix + name);
    }
    closedir(dir);
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  *files = std::move(found);
  return true;
}

bool LoadScenarioByName(const std::vector<std::string>& paths, const std::string& name, Scenario* out,
                        std::string* error) {
  std::vector<std::string> files, names;
  if (!FindScenarioFiles(paths, &files, error)) return false;
  for (const std::string& file : files) {
    Scenario s;
    std::string ignored;
    if (!LoadScenarioFile(file, &s, &ignored)) continue;
    if (s.name == name) {
      *out = std::move(s);
      return true;
    }
    names.push_back(s.name);
  }
  const std::string near = ClosestMatch(name, names);
  *error = "no scenario named '" + name + "'; " +
           (near.empty() ? "known: " + JoinNames(names, ", ")
                         : "did you mean '" + near + "'? (known: " + JoinNames(names, ", ") + ")");
  return false;
}

bool LoadScenarioArgument(const std::vector<std::string>& paths, const std::string& argument, Scenario* out,
                          std::string* error) {
  const bool is_path = argument.find('/') != std::string::npos || (argument.size() > 5 && argument.ends_with(".json"));
  if (is_path) return LoadScenarioFile(argument, out, error);
  return LoadScenarioByName(paths, argument, out, error);
}

}  // namespace oomguard
