// The scenario loader's rules across fields and variants: each variant, merged over the base, must
// make a model the data fits, and expectations and relations must name variants that exist and hold
// checks that parse.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "scenario/scenario_loader.h"
#include "tests/scenario_text.h"

namespace oomguard {
namespace {

using testing::Load;
using testing::LoadError;
using testing::With;

TEST(ScenarioLoader, MergedVariantsObeyCrossFieldRules) {
  EXPECT_EQ(LoadError(With(R"("pitfalls": {"inplace": {"target": "output", "layer": 1}})")),
            "s.json: at pitfalls.inplace.layer: layer 1 does not exist: the model has 1 layers (0-0) (variant a)");
  EXPECT_EQ(LoadError(With("", R"("variants": {"a": {"pitfalls": {"inplace": {"target": "output", "layer": 4}}}})")),
            "s.json: at variants.a.pitfalls.inplace.layer: layer 4 does not exist: the model has 1 layers (0-0)");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "linear", "in": 4, "out": 4}, {"kind": "relu"}]},
                              "pitfalls": {"inplace": {"target": "parameter", "layer": 1}})")),
            "s.json: at pitfalls.inplace.layer: target \"parameter\" needs a layer with parameters; layer 1 is relu "
            "(variant a)");
  EXPECT_EQ(LoadError(With(R"("pitfalls": {"checkpoint": {"segments": 2}})")),
            "s.json: at pitfalls.checkpoint.segments: 2 segments for 1 layers: a segment holds at least one layer "
            "(variant a)");
  EXPECT_EQ(LoadError(With(R"("pitfalls": {"transfer": "inside"})")),
            "s.json: at pitfalls.transfer: \"inside\" transfers the batch inside the first checkpointed segment: it "
            "needs pitfalls.checkpoint.segments >= 1 (variant a)");
  EXPECT_EQ(LoadError(With(R"("loop": {"loss": "cross_entropy"})")),
            "s.json: at loop.loss: cross_entropy needs data.classes >= 1 (the targets are class ids) (variant a)");
  EXPECT_EQ(LoadError(With(R"("data": {"shape": [4], "classes": 3}, "loop": {"loss": "cross_entropy"})")),
            "s.json: at loop.loss: cross_entropy needs one output feature per class: the model outputs 2 features, "
            "data.classes is 3 (variant a)");
  // Note [The class axis]: PyTorch's dim 1 would be a position axis of a layer list's output.
  EXPECT_EQ(LoadError(With(R"("data": {"shape": [3, 4], "classes": 2}, "loop": {"loss": "cross_entropy"})")),
            "s.json: at data.shape: cross_entropy reads the classes on dim 1, as PyTorch's F.cross_entropy does "
            "([N, C, d1, ...]), but a layer list's output has its features last (here [batch, 3, 2]): give data.shape "
            "one entry, or use int64 token ids (their logits [N, T, V] are read by the last dim) (variant a)");
  EXPECT_EQ(
      LoadError(With(R"("data": {"shape": [8], "dtype": "int64"})")),
      "s.json: at data.vocab: int64 data (token ids) needs vocab >= 1: ids are drawn from [0, vocab) (variant a)");
  EXPECT_EQ(LoadError(With(R"("data": {"shape": [8], "dtype": "int64", "vocab": 100})")),
            "s.json: at model.layers[0].kind: int64 data (token ids) needs an embedding as the first layer, got linear "
            "(variant a)");
  EXPECT_EQ(LoadError(With(R"("data": {"shape": [8]})")),
            "s.json: at model.layers[0].in: linear takes 4 input features but receives 8 features from data.shape "
            "(variant a)");
  EXPECT_EQ(LoadError(With(R"("data": {"shape": [4]}, "model": {"layers": [{"kind": "linear", "in": 4, "out": 8},
                              {"kind": "gelu"}, {"kind": "layer_norm", "dim": 4}]})")),
            "s.json: at model.layers[2].dim: layer_norm takes dim 4 but receives 8 features from model.layers[1] "
            "(variant a)");
  EXPECT_EQ(LoadError(With(R"("data": {"shape": [8], "dtype": "int64", "vocab": 100},
                              "model": {"layers": [{"kind": "embedding", "vocab": 50, "dim": 4}]})")),
            "s.json: at model.layers[0].vocab: the embedding has 50 rows but token ids go up to 99 (data.vocab is 100) "
            "(variant a)");
  EXPECT_EQ(LoadError(With(R"("data": {"shape": [4]}, "model": {"layers": [{"kind": "linear", "in": 4, "out": 4},
                              {"kind": "embedding", "vocab": 5, "dim": 4}]})")),
            "s.json: at model.layers[1].kind: an embedding takes token ids: it must be the first layer, with "
            "data.dtype int64 (variant a)");
  EXPECT_EQ(LoadError(With(R"("loop": {"loss_history": {"from": "eval", "keep": "item"}})")),
            "s.json: at loop.loss_history.from: keeping evaluation losses needs loop.eval.batches >= 1 (no evaluation "
            "runs) (variant a)");
  EXPECT_EQ(LoadError(With(R"("loop": {"backward": false, "clip_grad_norm": 1.0})")),
            "s.json: at loop.clip_grad_norm: clipping needs gradients: loop.backward is false (variant a)");
  EXPECT_EQ(LoadError(With(R"("loop": {"clip_grad_norm": 0})")),
            "s.json: at loop.clip_grad_norm: expected a max norm > 0, at most 3.4e38 (float's range), got 0");
  EXPECT_EQ(LoadError(With(R"("loop": {"autocast": "bf16"})")),
            "s.json: at loop.autocast: unknown autocast dtype \"bf16\" (valid values: none, bfloat16, float16)");
  EXPECT_EQ(LoadError(With(R"("model": null)")), "s.json: at model: expected an object, got null");
  EXPECT_EQ(LoadError(With("", R"("variants": {"a": {"model": null}})")),
            "s.json: at variants.a.model.layers: a model needs at least one layer (or a TorchScript module: "
            "model.torchscript)");
  EXPECT_EQ(LoadError(With("", R"("variants": {"ok": {}, "b": {"data": {"shape": [5]}}})")),
            "s.json: at model.layers[0].in: linear takes 4 input features but receives 5 features from data.shape "
            "(variant b)");
}

TEST(ScenarioLoader, ExpectationsAndRelationsNameExistingVariants) {
  const std::string two = R"("variants": {"pitfall": {}, "fixed": {}})";
  EXPECT_EQ(LoadError(With(R"("expect": {"pitfal": {}})", two)),
            "s.json: at expect: unknown variant \"pitfal\"; did you mean \"pitfall\"? (variants: pitfall, fixed)");
  EXPECT_EQ(LoadError(With(R"("checks": ["pitfall.peak >= 2 * fixd.peak"])", two)),
            "s.json: at checks[0]: unknown variant \"fixd\"; did you mean \"fixed\"? (variants: pitfall, fixed)");
  EXPECT_EQ(LoadError(With(R"("expect": {"fixed": {"checks": ["peak <= 1GiB", "peak x 12MiB"]}})", two)),
            "s.json: at expect.fixed.checks[1]: at column 6: expected an operator (== != < <= > >=), got 'x'");
  EXPECT_EQ(LoadError(With(R"("checks": ["peak <= 1GiB"])", two)),
            "s.json: at checks[0]: at column 6: expected '.' and a metric after variant 'peak' (relations name "
            "VARIANT.METRIC, e.g. fixed.peak), got '<='");
  EXPECT_EQ(LoadError(With(R"("checks": [3])", two)),
            "s.json: at checks[0]: expected a check expression such as \"pitfall.peak >= 2 * fixed.peak\", or "
            "{\"kernels\": \"cpu\", \"check\": \"pitfall.peak >= 2 * fixed.peak\"}, got 3");
  EXPECT_EQ(LoadError(With(R"("expect": {"fixed": {"leak": "no"}})", two)),
            "s.json: at expect.fixed.leak: expected true or false, got string \"no\"");
  EXPECT_EQ(LoadError(With(R"("expect": {"fixed": {"xfail": ""}})", two)),
            "s.json: at expect.fixed.xfail: expected a non-empty string, got string \"\"");
  EXPECT_EQ(LoadError(With(R"("expect": {"fixed": {"outcom": "oom"}})", two)),
            "s.json: at expect.fixed: unknown key \"outcom\"; did you mean \"outcome\"? (valid keys: outcome, leak, "
            "checks, xfail, diagnoses)");
  Scenario s = Load(With(R"("checks": ["pitfall.peak >= 2 * fixed.peak", "pitfall.grads != fixed.grads"])", two));
  EXPECT_EQ(s.checks.size(), 2u);
}

// Note [Whose kernels a check is for]: {"kernels": "cpu" | "cuda", "check": EXPRESSION}, in the
// relations and in a variant's expectation; each mistake is named at its path.
TEST(ScenarioLoader, AChecksKernelsAreCpuOrCudaAndItsExpressionIsParsed) {
  const std::string two = R"("variants": {"pitfall": {}, "fixed": {}})";
  Scenario s = Load(With(R"("checks": ["pitfall.peak >= fixed.peak", {"kernels": "cuda", "check": "fixed.peak > 0"}],
                            "expect": {"fixed": {"checks": [{"check": "peak <= 1GiB", "kernels": "cpu"}]}})",
                         two));
  EXPECT_EQ(s.checks, (std::vector<ScenarioCheck>{{"pitfall.peak >= fixed.peak", ""}, {"fixed.peak > 0", "cuda"}}));
  EXPECT_EQ(s.expectations.at("fixed").checks, (std::vector<ScenarioCheck>{{"peak <= 1GiB", "cpu"}}));
  EXPECT_EQ(LoadError(With(R"("checks": [{"kernels": "gpu", "check": "fixed.peak > 0"}])", two)),
            "s.json: at checks[0].kernels: unknown kernels \"gpu\"; did you mean \"cpu\"? (valid values: cpu, cuda)");
  EXPECT_EQ(LoadError(With(R"("checks": [{"kernels": "CUDA", "check": "fixed.peak > 0"}])", two)),
            "s.json: at checks[0].kernels: unknown kernels \"CUDA\"; did you mean \"cuda\"? (valid values: cpu, cuda)");
  EXPECT_EQ(LoadError(With(R"("checks": [{"kernels": 1, "check": "fixed.peak > 0"}])", two)),
            "s.json: at checks[0].kernels: expected one of cpu, cuda, got 1");
  EXPECT_EQ(LoadError(With(R"("checks": [{"kernels": "cpu"}])", two)),
            "s.json: at checks[0]: missing required key \"check\" (a check expression)");
  EXPECT_EQ(LoadError(With(R"("checks": [{"check": "fixed.peak > 0"}])", two)),
            "s.json: at checks[0]: missing required key \"kernels\" (whose kernels the check's arithmetic is for: cpu "
            "or cuda)");
  EXPECT_EQ(LoadError(With(R"("checks": [{"kernel": "cpu", "check": "fixed.peak > 0"}])", two)),
            "s.json: at checks[0]: unknown key \"kernel\"; did you mean \"kernels\"? (valid keys: kernels, check)");
  EXPECT_EQ(LoadError(With(R"("expect": {"fixed": {"checks": [{"kernels": "cpu", "check": "peak x 1"}]}})", two)),
            "s.json: at expect.fixed.checks[0].check: at column 6: expected an operator (== != < <= > >=), got 'x'");
  EXPECT_EQ(LoadError(With(R"("checks": [{"kernels": "cpu", "check": "fixd.peak > 0"}])", two)),
            "s.json: at checks[0].check: unknown variant \"fixd\"; did you mean \"fixed\"? (variants: pitfall, fixed)");
  EXPECT_EQ(
      LoadError(With(R"("checks": [{"kernels": "cpu", "check": 3}])", two)),
      "s.json: at checks[0].check: expected a check expression such as \"pitfall.peak >= 2 * fixed.peak\", got 3");
}

TEST(ScenarioLoader, DiagnosesExpectationsNameKnownKindsOnce) {
  const std::string two = R"("variants": {"pitfall": {}, "fixed": {}})";
  EXPECT_EQ(LoadError(With(R"("expect": {"fixed": {"diagnoses": "leak"}})", two)),
            "s.json: at expect.fixed.diagnoses: expected an array of diagnosis kinds such as [\"eval-keeps-graph\"] "
            "([] for none), got string \"leak\"");
  EXPECT_EQ(LoadError(With(R"("expect": {"fixed": {"diagnoses": ["leek"]}})", two)).substr(0, 89),
            "s.json: at expect.fixed.diagnoses[0]: unknown diagnosis kind \"leek\"; did you mean \"leak\"?");
  EXPECT_EQ(LoadError(With(R"("expect": {"fixed": {"diagnoses": ["leak", "leak"]}})", two)),
            "s.json: at expect.fixed.diagnoses[1]: \"leak\" is listed twice");
  Scenario s =
      Load(With(R"("expect": {"pitfall": {"diagnoses": ["retained-grad", "leak"]}, "fixed": {"diagnoses": []}})", two));
  EXPECT_EQ(s.expectations.at("pitfall").diagnoses,
            (std::vector<DiagnosisKind>{DiagnosisKind::kRetainedGrad, DiagnosisKind::kLeak}));
  EXPECT_EQ(s.expectations.at("fixed").diagnoses, std::vector<DiagnosisKind>{});
  EXPECT_FALSE(Load(With("", two)).expectations.count("fixed") &&
               Load(With("", two)).expectations.at("fixed").diagnoses.has_value());
}

}  // namespace
}  // namespace oomguard

namespace oomguard {
namespace {

// model.torchscript: resolved against the scenario file's folder, and excluding the keys that
// describe a layer list; data.inputs: the forward's inputs, excluding data.shape/dtype/vocab.
class ModuleKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = ::testing::TempDir() + "/module_keys";
    mkdir(folder_.c_str(), 0755);
    std::ofstream(folder_ + "/m.pt") << "not checked by the loader";
  }
  // `extra` top-level keys in a scenario loaded as FOLDER/s.json.
  bool LoadIn(const std::string& extra, Scenario* out, std::string* error,
              const std::string& variants = R"("variants": {"a": {}})") {
    const std::string text = R"({"name": "t", "summary": "s", )" + extra + ", " + variants + "}";
    return LoadScenarioText(text, folder_ + "/s.json", out, error);
  }
  std::string ErrorOf(const std::string& extra, const std::string& variants = R"("variants": {"a": {}})") {
    Scenario s;
    std::string error;
    EXPECT_FALSE(LoadIn(extra, &s, &error, variants)) << extra;
    return error.substr(error.find(": at ") + 2);
  }
  std::string folder_;
};

TEST_F(ModuleKeys, AModuleFileIsFoundBesideTheScenarioAndNamesItsSource) {
  Scenario s;
  std::string error;
  ASSERT_TRUE(LoadIn(R"("model": {"torchscript": "m.pt"}, "data": {"shape": [3, 8, 8]})", &s, &error)) << error;
  EXPECT_EQ(s.variants[0].model.source, "torchscript");
  EXPECT_EQ(s.variants[0].model.torchscript, folder_ + "/m.pt");
  EXPECT_TRUE(s.variants[0].model.layers.empty());
}

TEST_F(ModuleKeys, SeveralInputsAreTheFirstInDataAndTheRestAsExtraInputs) {
  Scenario s;
  std::string error;
  ASSERT_TRUE(LoadIn(R"("model": {"torchscript": "m.pt"}, "data": {"batch": 2, "inputs": [)"
                     R"({"shape": [16], "dtype": "int64", "vocab": 100}, {"shape": [16], "dtype": "bool"}]})",
                     &s, &error))
      << error;
  const DataSpec& d = s.variants[0].data;
  EXPECT_EQ(d.shape, std::vector<int64_t>{16});
  EXPECT_EQ(d.dtype, DType::kInt64);
  EXPECT_EQ(d.vocab, 100);
  ASSERT_EQ(d.extra_inputs.size(), 1u);
  EXPECT_EQ(d.extra_inputs[0].dtype, DType::kBool);
  EXPECT_EQ(d.extra_inputs[0].shape, std::vector<int64_t>{16});
}

TEST_F(ModuleKeys, MistakesNameTheKeyAndSayWhy) {
  EXPECT_EQ(ErrorOf(R"("model": {"torchscript": "missing.pt"}, "data": {"shape": [4]})"),
            "at model.torchscript: no such file: " + folder_ +
                "/missing.pt (a path relative to the scenario file's folder; write it with "
                "torch.jit.script(model).save(...)) (variant a)");
  EXPECT_EQ(ErrorOf(R"("model": {"torchscript": "m.pt", "layers": [{"kind": "relu"}]}, "data": {"shape": [4]})"),
            "at model.torchscript: give either model.layers or model.torchscript, not both (variant a)");
  EXPECT_EQ(ErrorOf(R"("model": {"torchscript": "m.pt", "dtype": "bfloat16"}, "data": {"shape": [4]})"),
            "at model.dtype: a TorchScript module keeps the dtypes it was saved with: save it in the dtype to "
            "measure (model.to(torch.bfloat16) before torch.jit.script) (variant a)");
  EXPECT_EQ(ErrorOf(R"("model": {"torchscript": "m.pt"}, "data": {"shape": [4], "inputs": [{"shape": [4]}]})"),
            "at data.shape: give the inputs either as data.inputs or as data.shape (one input), not both (variant a)");
  EXPECT_EQ(ErrorOf(R"("model": {"torchscript": "m.pt"}, "data": {"inputs": [{"dtype": "int64", "vocab": 5}]})"),
            "at data.inputs[0]: missing required key \"shape\" (the shape of one sample)");
  EXPECT_EQ(ErrorOf(R"("model": {"torchscript": "m.pt"}, "data": {"inputs": [{"shape": [4], "dtype": "int64"}]})"),
            "at data.inputs[0].vocab: int64 input (ids) needs vocab >= 1: ids are drawn from [0, vocab)");
  EXPECT_EQ(ErrorOf(R"("model": {"torchscript": "m.pt"}, "data": {"inputs": [{"shape": [4]}, {"shape": [4]}]},)"
                    R"( "pitfalls": {"retain_grad": true})"),
            "at pitfalls: the pitfalls that act between an nn.Sequential's children pass one tensor along: they "
            "need data with one input, not data.inputs with 2 (variant a)");
  EXPECT_EQ(ErrorOf(R"("model": {"layers": [{"kind": "relu"}]}, "data": {"inputs": [{"shape": [4]}, {"shape": [4]}]})"),
            "at data.inputs: a layer list takes one input: give data.inputs one entry, or data.shape, dtype and vocab "
            "(several inputs are for model.torchscript) (variant a)");
}

}  // namespace
}  // namespace oomguard
