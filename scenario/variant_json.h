// JSON bindings of a variant's configuration (scenario.h): the keys model, data, loop, pitfalls,
// seed, workload and knobs, as the top level of a scenario file holds them (the base) and as each variant's merge patch
// does.
//
//   VariantSpec spec;
//   if (!ReadFields(json, JsonPath(), VariantConfigFields(&spec, /*patch=*/false), false, &error)) { ... }
//
// Key names are the member names of scenario.h. Each field is checked as it is read: type, range,
// enumeration value, and the fields a layer kind takes; rules relating fields are in variant_rules.h.
// Error policy as in json_diagnostics.h. Header-only: included by the loader and variant_resolution.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "base/input_limits.h"
#include "model/dtype.h"
#include "model/layer_kinds.h"
#include "model/scenario.h"
#include "scenario/json_diagnostics.h"
#include "scenario/text_fields.h"
#include "scenario/workload_json.h"

namespace oomguard {
namespace variant_json {

using Json = OrderedJson;

// Note [Numbers LibTorch computes with in float]: a layer's factor, clip_grad_norm and the optimizer's
// numbers reach LibTorch as scalars it converts to float (the compute type of float, bfloat16 and
// float16 tensors alike), and a finite value beyond float's range is an exception there, not an
// infinity. A factor and a max norm are used alone: float's range. The optimizers combine theirs
// (AdamW's 1 - lr x weight_decay, Adam's lr / 0.1 at its first step): each at most 1e18 keeps every
// such product within it.
inline constexpr double kMaxFloat = 3.4028234663852886e38;
inline constexpr double kMaxOptimizerNumber = 1e18;

// The readers of every LayerSpec field; which of them a kind takes is its LayerKindInfo row's
// `fields` (model/layer_kinds.h).
inline std::vector<Field> LayerFields(LayerSpec* out) {
  return {
      {"in", IntField(&out->in, 1)},
      {"out", IntField(&out->out, 1)},
      {"dim", IntField(&out->dim, 1)},
      {"hidden", IntField(&out->hidden, 1)},
      {"heads", IntField(&out->heads, 1)},
      {"vocab", IntField(&out->vocab, 1)},
      {"p", NumberField(&out->p, "a number in [0, 1)", [](double v) { return v >= 0 && v < 1; })},
      {"factor", NumberField(&out->factor, "a number within float's range (magnitude at most 3.4e38)",
                             [](double v) { return std::abs(v) <= kMaxFloat; })},
      {"inplace", BoolField(&out->inplace)},
      {"causal", BoolField(&out->causal)},
      {"bias", BoolField(&out->bias)},
      {"activation", EnumField(&out->activation, "activation", {"relu", "gelu"})},
      {"attention", EnumField(&out->attention, "attention implementation", {"math", "flash"})},
  };
}

// `repeat` (any kind, default 1) stands for that many copies of the layer in a row.
inline bool ReadLayer(const Json& value, const JsonPath& path, LayerSpec* out, int64_t* repeat, std::string* error) {
  if (!value.is_object()) {
    return Fail(path, "expected a layer such as {\"kind\": \"relu\"}, got " + DescribeJson(value), error);
  }
  const std::vector<std::string> kinds = LayerKindNames();
  auto kind_value = value.find("kind");
  if (kind_value == value.end()) {
    return Fail(path, "missing required key \"kind\" (one of: " + JoinNames(kinds, ", ") + ")", error);
  }
  if (!EnumField(&out->kind, "layer kind", kinds)(*kind_value, path.Key("kind"), error)) return false;
  const LayerKindInfo& kind = LayerKindOf(*out);
  const std::vector<Field> fields = LayerFields(out);
  *repeat = 1;
  for (const auto& [key, field_value] : value.items()) {
    if (key == "kind") continue;
    if (key == "repeat") {
      if (!IntField(repeat, 1)(field_value, path.Key(key), error)) return false;
      continue;
    }
    // `&key = key`: clang before 16 cannot capture a structured binding.
    auto field = std::find_if(fields.begin(), fields.end(), [&, &key = key](const Field& f) { return f.key == key; });
    if (field != fields.end() && !kind.Takes(key)) {
      return Fail(path,
                  "layer kind " + kind.name + " takes no field " + Quoted(key) + " (it takes" +
                      (kind.fields.empty() ? " no fields" : ": " + JoinNames(kind.fields, ", ")) + ")",
                  error);
    }
    if (field == fields.end()) {
      std::vector<std::string> valid = {"kind", "repeat"};
      valid.insert(valid.end(), kind.fields.begin(), kind.fields.end());
      return Fail(path, UnknownNameMessage("key", key, valid, "valid keys"), error);
    }
    if (!field->read(field_value, path.Key(key), error)) return false;
  }
  for (const std::string& required : kind.required) {
    if (!value.contains(required)) {
      return Fail(path,
                  "missing required key " + Quoted(required) + " (layer kind " + kind.name +
                      " requires: " + JoinNames(kind.required, ", ") + ")",
                  error);
    }
  }
  if (out->heads > 0 && out->dim % out->heads != 0) {
    return Fail(path.Key("heads"),
                std::to_string(out->heads) + " heads do not divide dim " + std::to_string(out->dim) +
                    " (each head gets dim / heads features)",
                error);
  }
  return true;
}

inline FieldReader LayersField(std::vector<LayerSpec>* out) {
  return [out](const Json& value, const JsonPath& path, std::string* error) {
    if (!value.is_array()) return Fail(path, "expected an array of layers, got " + DescribeJson(value), error);
    if (value.empty()) return Fail(path, "a model needs at least one layer", error);
    out->clear();
    for (size_t i = 0; i < value.size(); ++i) {
      LayerSpec layer;
      int64_t repeat = 1;
      if (!ReadLayer(value[i], path.Index(static_cast<int64_t>(i)), &layer, &repeat, error)) return false;
      if (static_cast<int64_t>(out->size()) + repeat > limits::kMaxLayers) {
        return Fail(path.Index(static_cast<int64_t>(i)).Key(repeat > 1 ? "repeat" : "kind"),
                    "the model would have more than " + std::to_string(limits::kMaxLayers) + " layers (" +
                        std::to_string(out->size()) + " before this entry, " + std::to_string(repeat) +
                        " here; the limit for one model)",
                    error);
      }
      out->insert(out->end(), static_cast<size_t>(repeat), layer);
    }
    return true;
  };
}

inline FieldReader ShapeField(std::vector<int64_t>* out) {
  return [out](const Json& value, const JsonPath& path, std::string* error) {
    if (!value.is_array() || value.empty()) {
      return Fail(path, "expected the shape of one sample, such as [512], got " + DescribeJson(value), error);
    }
    out->assign(value.size(), 0);
    for (size_t i = 0; i < value.size(); ++i) {
      if (!IntField(&(*out)[i], 1)(value[i], path.Index(static_cast<int64_t>(i)), error)) return false;
    }
    return true;
  };
}

// data.inputs: every input of the forward, in order, each {shape, dtype, vocab}; the first lands in
// DataSpec's own fields, the rest in extra_inputs. Replaced whole by a patch, as layers are.
inline FieldReader InputsField(DataSpec* data) {
  return [data](const Json& value, const JsonPath& path, std::string* error) {
    if (!value.is_array() || value.empty()) {
      return Fail(path,
                  "expected the forward's inputs, such as [{\"shape\": [128], \"dtype\": \"int64\", \"vocab\": 50257}, "
                  "{\"shape\": [128], \"dtype\": \"bool\"}], got " +
                      DescribeJson(value),
                  error);
    }
    data->extra_inputs.clear();
    for (size_t i = 0; i < value.size(); ++i) {
      InputSpec input;
      const JsonPath at = path.Index(static_cast<int64_t>(i));
      if (!value[i].is_object()) {
        return Fail(at,
                    "expected an input such as {\"shape\": [128], \"dtype\": \"int64\"}, got " + DescribeJson(value[i]),
                    error);
      }
      const std::vector<Field> fields = {{"shape", ShapeField(&input.shape)},
                                         {"dtype", NamedField(&input.dtype, "dtype", AllValues<DType>())},
                                         {"vocab", IntField(&input.vocab, 1)}};
      if (!ReadFields(value[i], at, fields, false, error)) return false;
      if (input.shape.empty()) return Fail(at, "missing required key \"shape\" (the shape of one sample)", error);
      if (input.dtype == DType::kInt64 && input.vocab == 0) {
        return Fail(at.Key("vocab"), "int64 input (ids) needs vocab >= 1: ids are drawn from [0, vocab)", error);
      }
      if (i == 0) {
        data->shape = input.shape;
        data->dtype = input.dtype;
        data->vocab = input.vocab;
      } else {
        data->extra_inputs.push_back(input);
      }
    }
    return true;
  };
}

// parallel.param_dtype, parallel.reduce_dtype: one of the model dtypes; absent, none.
inline FieldReader OptionalDTypeField(std::optional<DType>* out) {
  return [out](const Json& value, const JsonPath& path, std::string* error) {
    DType dtype = DType::kFloat32;
    if (!NamedField(&dtype, "dtype", kModelDTypes)(value, path, error)) return false;
    *out = dtype;
    return true;
  };
}

inline FieldReader Object(std::vector<Field> fields, bool patch) {
  return [fields = std::move(fields), patch](const Json& value, const JsonPath& path, std::string* error) {
    return ReadFields(value, path, fields, patch, error);
  };
}

}  // namespace variant_json

// Where a variant's merged configuration combines keys that exclude each other: a model is a layer
// list or a TorchScript file; data gives its inputs as one shape or as a list. Paths as in
// FindWorkloadRuleProblem.
inline std::optional<WorkloadRuleProblem> FindModelKeyProblem(const OrderedJson& merged) {
  const auto has = [&](const char* object, const char* key) {
    return merged.contains(object) && merged[object].is_object() && merged[object].contains(key);
  };
  const JsonPath model = JsonPath().Key("model"), data = JsonPath().Key("data");
  if (has("model", "torchscript") && has("model", "layers")) {
    return WorkloadRuleProblem{model.Key("torchscript"), "give either model.layers or model.torchscript, not both"};
  }
  if (has("model", "torchscript") && has("model", "dtype")) {
    return WorkloadRuleProblem{model.Key("dtype"),
                               "a TorchScript module keeps the dtypes it was saved with: save it in the dtype "
                               "to measure (model.to(torch.bfloat16) before torch.jit.script)"};
  }
  for (const char* key : {"shape", "dtype", "vocab"}) {
    if (has("data", "inputs") && has("data", key)) {
      return WorkloadRuleProblem{data.Key(key), std::string("give the inputs either as data.inputs or as data.") + key +
                                                    " (one input), not both"};
    }
  }
  return std::nullopt;
}

// The readers of every configuration key, writing into *spec. With patch, null values are accepted (they
// delete the key, so the default applies), at every depth but inside arrays (layers are replaced whole).
inline std::vector<Field> VariantConfigFields(VariantSpec* spec, bool patch) {
  DataSpec* data = &spec->data;
  LoopSpec* loop = &spec->loop;
  PitfallSpec* pitfalls = &spec->pitfalls;
  using variant_json::InputsField;
  using variant_json::kMaxFloat;
  using variant_json::kMaxOptimizerNumber;
  using variant_json::LayersField;
  using variant_json::Object;
  using variant_json::ShapeField;
  // Note [Numbers LibTorch computes with in float]: the upper bounds.
  auto optimizer_number = [](double* out, const std::string& lower, bool zero_ok) {
    return NumberField(out, "a number " + lower + ", at most 1e18 (the optimizer computes with it in float)",
                       [zero_ok](double v) { return (zero_ok ? v >= 0 : v > 0) && v <= kMaxOptimizerNumber; });
  };
  return {
      {"model", Object({{"dtype", NamedField(&spec->model.dtype, "dtype", kModelDTypes)},
                        {"layers", LayersField(&spec->model.layers)},
                        {"torchscript", FilePathField(&spec->model.torchscript)}},
                       patch)},
      {"data", Object({{"batch", IntField(&data->batch, 1)},
                       {"shape", ShapeField(&data->shape)},
                       {"dtype", NamedField(&data->dtype, "dtype", AllValues<DType>())},
                       {"vocab", IntField(&data->vocab, 1)},
                       {"on_host", BoolField(&data->on_host)},
                       {"classes", IntField(&data->classes, 1)},
                       {"inputs", InputsField(data)}},
                      patch)},
      {"loop",
       Object({{"iterations", IntField(&loop->iterations, 1)},
               {"loss", EnumField(&loop->loss, "loss", {"mean", "mse", "cross_entropy"})},
               {"backward", BoolField(&loop->backward)},
               {"retain_graph", BoolField(&loop->retain_graph)},
               {"optimizer",
                Object({{"kind", EnumField(&loop->optimizer.kind, "optimizer", {"none", "sgd", "adam", "adamw"})},
                        {"lr", optimizer_number(&loop->optimizer.lr, "> 0", false)},
                        {"momentum", optimizer_number(&loop->optimizer.momentum, ">= 0", true)},
                        {"weight_decay", optimizer_number(&loop->optimizer.weight_decay, ">= 0", true)},
                        {"master_weights", BoolField(&loop->optimizer.master_weights)}},
                       patch)},
               {"zero_grad", EnumField(&loop->zero_grad, "zero_grad mode", {"none", "zero"})},
               {"accumulate", IntField(&loop->accumulate, 1)},
               {"autocast", EnumField(&loop->autocast, "autocast dtype", {"none", "bfloat16", "float16"})},
               {"clip_grad_norm", NumberField(&loop->clip_grad_norm, "a max norm > 0, at most 3.4e38 (float's range)",
                                              [](double v) { return v > 0 && v <= kMaxFloat; })},
               {"eval", Object({{"batches", IntField(&loop->eval.batches, 0)},
                                {"no_grad", BoolField(&loop->eval.no_grad)},
                                {"keep_outputs", BoolField(&loop->eval.keep_outputs)}},
                               patch)},
               {"loss_history", Object({{"from", EnumField(&loop->loss_history.from, "loss source", {"train", "eval"})},
                                        {"keep", EnumField(&loop->loss_history.keep, "keep mode",
                                                           {"none", "item", "detached", "attached"})}},
                                       patch)}},
              patch)},
      {"pitfalls",
       Object({{"inplace",
                Object({{"target", EnumField(&pitfalls->inplace.target, "target", {"none", "output", "parameter"})},
                        {"layer", IntField(&pitfalls->inplace.layer, 0)},
                        {"op", EnumField(&pitfalls->inplace.op, "op", {"mul_", "add_", "mul", "add"})}},
                       patch)},
               {"retain_grad", BoolField(&pitfalls->retain_grad)},
               {"keep_intermediates", BoolField(&pitfalls->keep_intermediates)},
               {"checkpoint", Object({{"segments", IntField(&pitfalls->checkpoint.segments, 0)},
                                      {"preserve_rng_state", BoolField(&pitfalls->checkpoint.preserve_rng_state)}},
                                     patch)},
               {"transfer", EnumField(&pitfalls->transfer, "transfer", {"outside", "inside"})}},
              patch)},
      {"parallel",
       Object({{"world", IntField(&spec->parallel.world, 1)},
               {"rank", IntField(&spec->parallel.rank, 0)},
               {"strategy", EnumField(&spec->parallel.strategy, "strategy", {"ddp", "zero1", "zero2", "fsdp"})},
               {"bucket_cap_mb", NumberField(&spec->parallel.bucket_cap_mb, "a bucket size in MiB > 0, at most 1e6",
                                             [](double v) { return v > 0 && v <= 1e6; })},
               {"gradient_as_bucket_view", BoolField(&spec->parallel.gradient_as_bucket_view)},
               {"unit", StringField(&spec->parallel.unit)},
               {"init", EnumField(&spec->parallel.init, "init", {"device", "meta"})},
               {"param_dtype", variant_json::OptionalDTypeField(&spec->parallel.param_dtype)},
               {"reduce_dtype", variant_json::OptionalDTypeField(&spec->parallel.reduce_dtype)}},
              patch)},
      {"seed", IntField(&spec->seed, 0)},
      {"workload", WorkloadNameField(&spec->workload)},
      {"knobs", KnobsField(&spec->knobs)},
  };
}

}  // namespace oomguard
