// The rules a variant must satisfy as a whole, checked after its merge patch is applied: those that
// relate two fields (the layer an in-place pitfall targets exists, feature sizes chain from the data
// through the layers, cross_entropy has classes to predict). Single fields are checked as they are read.
//
//   if (std::optional<SpecProblem> problem = FindSpecProblem(spec)) {
//     // problem->path: model.layers[1].in; problem->message: "linear takes 256 input features but ..."
//   }
//
// Header-only; nothing here can fail or throw.
#pragma once

#include <optional>
#include <string>

#include "model/dtype.h"
#include "model/layer_kinds.h"
#include "model/scenario.h"
#include "scenario/json_diagnostics.h"

namespace oomguard {

struct SpecProblem {
  JsonPath path;        // the field to change, as written in a scenario file
  std::string message;  // what is wrong, one line
};

// fsdp with checkpointing (Note [Checkpointing an FSDP2 unit], workload/parallel/fully_sharded.h): a checkpointed
// segment that holds a unit holds nothing else, as fully_shard(checkpoint_wrapper(block)) does. The
// segments are split as the loop splits them: n / segments layers each, the first n % segments one more.
inline std::optional<SpecProblem> FindFsdpCheckpointProblem(const VariantSpec& spec) {
  const std::vector<LayerSpec>& layers = spec.model.layers;
  const int64_t n = static_cast<int64_t>(layers.size()), segments = spec.pitfalls.checkpoint.segments;
  const std::string& unit = spec.parallel.unit;
  if (segments == 0 || segments > n || unit == "model") return std::nullopt;
  int64_t begin = 0;
  for (int64_t s = 0; s < segments; ++s) {
    const int64_t end = begin + n / segments + (s < n % segments ? 1 : 0);
    for (int64_t i = begin; end - begin > 1 && i < end; ++i) {
      const LayerKindInfo& kind = LayerKindOf(layers[i]);
      if (!kind.has_parameters || (unit != "layer" && unit != kind.name)) continue;
      const std::string where = "segment " + std::to_string(s) + " holds layers " + std::to_string(begin) + "-" +
                                std::to_string(end - 1) + " and layer " + std::to_string(i) + " (" + kind.name +
                                ") is a unit";
      return SpecProblem{JsonPath().Key("pitfalls").Key("checkpoint").Key("segments"),
                         "with parallel.strategy fsdp a checkpointed segment that holds a unit holds nothing else "
                         "(fully_shard(checkpoint_wrapper(block))): " +
                             where + "; " + std::to_string(n) + " segments (one a layer) are aligned"};
    }
    begin = end;
  }
  return std::nullopt;
}

// fsdp (Note [One FSDP2 rank], workload/parallel/fully_sharded.h): units among the layer list's segments, and
// none of the knobs that would touch a resharded parameter.
inline std::optional<SpecProblem> FindFsdpProblem(const VariantSpec& spec) {
  const ParallelSpec& p = spec.parallel;
  const JsonPath pitfalls = JsonPath().Key("pitfalls");
  const std::string not_yet = " is not simulated with parallel.strategy fsdp yet";
  if (!spec.model.torchscript.empty())
    return SpecProblem{JsonPath().Key("model").Key("torchscript"), "a TorchScript model" + not_yet};
  if (std::optional<SpecProblem> problem = FindFsdpCheckpointProblem(spec)) return problem;
  if (spec.pitfalls.inplace.target == "parameter")
    return SpecProblem{pitfalls.Key("inplace").Key("target"), "an in-place edit of a sharded parameter" + not_yet};
  bool found = p.unit == "layer" || p.unit == "model";
  for (const LayerSpec& layer : spec.model.layers) found = found || layer.kind == p.unit;
  if (found) return std::nullopt;
  return SpecProblem{JsonPath().Key("parallel").Key("unit"),
                     "unit \"" + p.unit + "\" is neither \"layer\", \"model\" nor a layer kind of model.layers"};
}

// parallel.param_dtype and reduce_dtype (Note [FSDP2 mixed precision], workload/parallel/fully_sharded.h):
// FSDP2's MixedPrecisionPolicy, for strategy fsdp on a float32 model.
inline std::optional<SpecProblem> FindFsdpMixedPrecisionProblem(const VariantSpec& spec) {
  const ParallelSpec& p = spec.parallel;
  if (!p.param_dtype && !p.reduce_dtype) return std::nullopt;
  const JsonPath at = JsonPath().Key("parallel").Key(p.param_dtype ? "param_dtype" : "reduce_dtype");
  if (p.strategy != "fsdp") {
    return SpecProblem{at, "FSDP2's MixedPrecisionPolicy is a knob of parallel.strategy \"fsdp\"; strategy is \"" +
                               p.strategy + "\" (set strategy \"fsdp\", or leave param_dtype and reduce_dtype out)"};
  }
  if (spec.model.dtype != DType::kFloat32) {
    return SpecProblem{at,
                       "FSDP2's MixedPrecisionPolicy casts a float32 model's shards: expected model.dtype "
                       "\"float32\", got \"" +
                           std::string(Name(spec.model.dtype)) +
                           "\" (set model.dtype \"float32\", or leave param_dtype and reduce_dtype out)"};
  }
  return std::nullopt;
}

// parallel: the rank exists, and a ZeRO stage meets only the loop it mirrors (Note [One simulated
// rank], workload/parallel/data_parallel.h): one micro-batch per step, no clipping, no GradScaler.
inline std::optional<SpecProblem> FindParallelProblem(const VariantSpec& spec) {
  const ParallelSpec& p = spec.parallel;
  const JsonPath parallel = JsonPath().Key("parallel"), loop = JsonPath().Key("loop");
  if (p.rank >= p.world) {
    return SpecProblem{parallel.Key("rank"), "rank " + std::to_string(p.rank) + " is not a rank of world " +
                                                 std::to_string(p.world) + " (ranks are 0 .. world - 1)"};
  }
  if (p.init == "meta" && p.strategy != "fsdp")
    return SpecProblem{parallel.Key("init"), "a model built on meta is sharded by strategy fsdp alone"};
  if (std::optional<SpecProblem> problem = FindFsdpMixedPrecisionProblem(spec)) return problem;
  if (!p.active() || p.strategy == "ddp") return std::nullopt;
  const std::string not_yet = " is not simulated with parallel.strategy " + p.strategy + " yet";
  if (spec.loop.accumulate > 1) return SpecProblem{loop.Key("accumulate"), "gradient accumulation" + not_yet};
  if (spec.loop.clip_grad_norm > 0)
    return SpecProblem{loop.Key("clip_grad_norm"), "clipping a shard's gradients" + not_yet};
  if (spec.loop.autocast == "float16") return SpecProblem{loop.Key("autocast"), "float16's GradScaler" + not_yet};
  return p.strategy == "fsdp" ? FindFsdpProblem(spec) : std::nullopt;
}

// loop.optimizer.master_weights (Note [Master weights], workload/loop/master_weights.h): a float32 copy of
// a bfloat16 or float16 model's parameters, which an optimizer steps.
inline std::optional<SpecProblem> FindMasterWeightsProblem(const VariantSpec& spec) {
  if (!spec.loop.optimizer.master_weights) return std::nullopt;
  const JsonPath at = JsonPath().Key("loop").Key("optimizer").Key("master_weights");
  if (spec.loop.optimizer.kind == "none") {
    return SpecProblem{at, "master weights are what an optimizer steps: loop.optimizer.kind is \"none\" (give "
                           "\"adam\", \"adamw\" or \"sgd\", or leave master_weights out)"};
  }
  if (!spec.model.torchscript.empty()) {
    return SpecProblem{at, "master weights need model.dtype bfloat16 or float16, which a TorchScript module does "
                           "not give (it keeps the dtypes it was saved with)"};
  }
  if (spec.model.dtype != DType::kBFloat16 && spec.model.dtype != DType::kFloat16) {
    return SpecProblem{at, "master weights are a float32 copy of a bfloat16 or float16 model; model.dtype is " +
                               std::string(Name(spec.model.dtype)) +
                               ", whose parameters are their own master: set model.dtype \"bfloat16\" or "
                               "\"float16\", or leave master_weights out"};
  }
  return std::nullopt;
}

// The first rule `spec` breaks, or nullopt.
inline std::optional<SpecProblem> FindSpecProblem(const VariantSpec& spec) {
  const JsonPath model = JsonPath().Key("model"), data = JsonPath().Key("data"), loop = JsonPath().Key("loop");
  const JsonPath pitfalls = JsonPath().Key("pitfalls");
  const std::vector<LayerSpec>& layers = spec.model.layers;
  const int64_t count = static_cast<int64_t>(layers.size());
  const bool ids = spec.data.dtype == DType::kInt64;
  if (layers.empty() && spec.model.torchscript.empty()) {
    return SpecProblem{model.Key("layers"),
                       "a model needs at least one layer (or a TorchScript module: model.torchscript)"};
  }
  if (spec.data.shape.empty()) {
    return SpecProblem{data.Key("shape"),
                       "missing: the shape of one sample, e.g. [512] (features) or [128] (token ids)"};
  }
  if (ids && spec.data.vocab == 0) {
    return SpecProblem{data.Key("vocab"), "int64 data (token ids) needs vocab >= 1: ids are drawn from [0, vocab)"};
  }
  // A TorchScript module's structure (segments, layer indices, output features) is checked when it is
  // loaded; the layer list's here.
  const bool module = !spec.model.torchscript.empty();
  const PitfallSpec& p = spec.pitfalls;
  if (module && !spec.data.extra_inputs.empty() &&
      (p.checkpoint.segments > 0 || p.inplace.target != "none" || p.retain_grad || p.keep_intermediates)) {
    return SpecProblem{pitfalls,
                       "the pitfalls that act between an nn.Sequential's children pass one tensor along: "
                       "they need data with one input, not data.inputs with " +
                           std::to_string(spec.data.extra_inputs.size() + 1)};
  }
  if (!module && !spec.data.extra_inputs.empty()) {
    return SpecProblem{data.Key("inputs"),
                       "a layer list takes one input: give data.inputs one entry, or "
                       "data.shape, dtype and vocab (several inputs are for model.torchscript)"};
  }
  if (!module && ids && LayerKindOf(layers[0]).features != FeatureRule::kEmbedding) {
    return SpecProblem{model.Key("layers").Index(0).Key("kind"),
                       "int64 data (token ids) needs an embedding as the first layer, got " + layers[0].kind};
  }

  // Feature sizes chain from the data through the layers, by each kind's FeatureRule (layer_kinds.h).
  int64_t features = spec.data.shape.back();
  std::string from = "data.shape";
  for (int64_t i = 0; i < (module ? 0 : count); ++i) {
    const LayerSpec& layer = layers[i];
    const FeatureRule rule = LayerKindOf(layer).features;
    const JsonPath at = model.Key("layers").Index(i);
    const std::string receives = " but receives " + std::to_string(features) + " features from " + from;
    if (rule == FeatureRule::kEmbedding) {
      if (i > 0 || !ids) {
        return SpecProblem{at.Key("kind"),
                           "an embedding takes token ids: it must be the first layer, with data.dtype int64"};
      }
      if (layer.vocab < spec.data.vocab) {
        return SpecProblem{at.Key("vocab"), "the embedding has " + std::to_string(layer.vocab) +
                                                " rows but token ids go up to " + std::to_string(spec.data.vocab - 1) +
                                                " (data.vocab is " + std::to_string(spec.data.vocab) + ")"};
      }
      features = layer.dim;
    } else if (rule == FeatureRule::kLinear) {
      if (layer.in != features) {
        return SpecProblem{at.Key("in"), "linear takes " + std::to_string(layer.in) + " input features" + receives};
      }
      features = layer.out;
    } else if (layer.attention == "flash" && layer.p > 0) {
      return SpecProblem{at.Key("p"),
                         "attention \"flash\" has no dropout inside attention (the fused cpu kernel has none): set "
                         "p to 0, or use attention \"math\""};
    } else if (rule == FeatureRule::kDim && layer.dim != features) {
      return SpecProblem{at.Key("dim"), layer.kind + " takes dim " + std::to_string(layer.dim) + receives};
    }
    from = at.ToString();
  }

  if (!module && p.inplace.target != "none") {
    const JsonPath layer = pitfalls.Key("inplace").Key("layer");
    if (p.inplace.layer >= count) {
      return SpecProblem{layer, "layer " + std::to_string(p.inplace.layer) + " does not exist: the model has " +
                                    std::to_string(count) + " layers (0-" + std::to_string(count - 1) + ")"};
    }
    const LayerKindInfo& kind = LayerKindOf(layers[p.inplace.layer]);
    if (p.inplace.target == "parameter" && !kind.has_parameters) {
      return SpecProblem{layer, "target \"parameter\" needs a layer with parameters; layer " +
                                    std::to_string(p.inplace.layer) + " is " + kind.name};
    }
  }
  if (!module && p.checkpoint.segments > count) {
    return SpecProblem{pitfalls.Key("checkpoint").Key("segments"), std::to_string(p.checkpoint.segments) +
                                                                       " segments for " + std::to_string(count) +
                                                                       " layers: a segment holds at least one layer"};
  }
  if (p.transfer == "inside" && p.checkpoint.segments == 0) {
    return SpecProblem{pitfalls.Key("transfer"),
                       "\"inside\" transfers the batch inside the first checkpointed segment: it needs "
                       "pitfalls.checkpoint.segments >= 1"};
  }
  if (p.transfer == "inside" && !spec.data.on_host) {
    return SpecProblem{pitfalls.Key("transfer"),
                       "\"inside\" transfers the batch to the device: it needs data.on_host true"};
  }

  if (spec.loop.loss == "cross_entropy") {
    if (spec.data.classes == 0) {
      return SpecProblem{loop.Key("loss"), "cross_entropy needs data.classes >= 1 (the targets are class ids)"};
    }
    if (!module && !ids && spec.data.shape.size() > 1) {  // Note [The class axis], workload/loop/cross_entropy.h
      std::string output = "[batch";
      for (size_t i = 0; i + 1 < spec.data.shape.size(); ++i) output += ", " + std::to_string(spec.data.shape[i]);
      return SpecProblem{data.Key("shape"),
                         "cross_entropy reads the classes on dim 1, as PyTorch's F.cross_entropy does ([N, C, d1, "
                         "...]), but a layer list's output has its features last (here " +
                             output + ", " + std::to_string(features) +
                             "]): give data.shape one entry, or use int64 token ids (their logits [N, T, V] are "
                             "read by the last dim)"};
    }
    if (!module && features != spec.data.classes) {
      return SpecProblem{loop.Key("loss"), "cross_entropy needs one output feature per class: the model outputs " +
                                               std::to_string(features) + " features, data.classes is " +
                                               std::to_string(spec.data.classes)};
    }
  }
  if (spec.data.classes > 0 && spec.loop.loss != "cross_entropy") {  // else set and never read
    return SpecProblem{data.Key("classes"), "data.classes gives cross_entropy its targets; loop.loss is \"" +
                                                spec.loop.loss + "\", which has none (leave classes out)"};
  }
  if (spec.loop.clip_grad_norm > 0 && !spec.loop.backward) {
    return SpecProblem{loop.Key("clip_grad_norm"), "clipping needs gradients: loop.backward is false"};
  }
  if (spec.loop.retain_graph && !spec.loop.backward) {
    return SpecProblem{loop.Key("retain_graph"),
                       "retain_graph keeps the graph through backward: loop.backward is "
                       "false"};
  }
  if (spec.loop.loss_history.from == "eval" && spec.loop.loss_history.keep != "none" && spec.loop.eval.batches == 0) {
    return SpecProblem{loop.Key("loss_history").Key("from"),
                       "keeping evaluation losses needs loop.eval.batches >= 1 (no evaluation runs)"};
  }
  if (std::optional<SpecProblem> problem = FindMasterWeightsProblem(spec)) return problem;
  return FindParallelProblem(spec);
}

}  // namespace oomguard
