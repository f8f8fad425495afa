#include "harness/scenario_loader.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace oomguard {
namespace {

// The annotated example of scenarios/FORMAT.md, verbatim.
constexpr const char* kExample = R"json({
  // Identity: the catalog, reports and baselines know the scenario by its name.
  "name": "forgotten-no-grad",
  "summary": "Evaluation without no_grad keeps every batch's autograd graph alive",
  "teach": [
    "Outside torch::NoGradGuard, every forward records a graph that holds the activations it saved.",
    "Keeping the eval outputs (to compute metrics later) keeps those graphs, one per batch, until evaluation ends.",
    "Fix: evaluate under torch::NoGradGuard (or torch::InferenceMode), or keep output.detach()."
  ],
  "backends": ["cpu", "meta", "cuda"],
  "card": "t4",

  // The base configuration: every variant starts from it.
  "model": {
    "layers": [
      {"kind": "linear", "in": 256, "out": 1024},
      {"kind": "gelu"},
      {"kind": "linear", "in": 1024, "out": 1024},
      {"kind": "gelu"},
      {"kind": "linear", "in": 1024, "out": 10}
    ]
  },
  "data": {"batch": 512, "shape": [256], "classes": 10},
  "loop": {
    "iterations": 2,
    "loss": "cross_entropy",
    "optimizer": {"kind": "adam", "lr": 0.001},
    // 8 evaluation batches after each iteration, every output kept for the metrics.
    "eval": {"batches": 8, "no_grad": true, "keep_outputs": true}
  },

  // Each variant is a JSON merge patch over the base: only what differs.
  "variants": {
    "pitfall": {"loop": {"eval": {"no_grad": false}}},
    "fixed": {}
  },

  // What each variant must show. Both run to completion; neither grows from iteration to iteration.
  "expect": {
    "pitfall": {"outcome": "pass", "checks": ["phase_peak.eval > phase_peak.forward"]},
    "fixed": {"outcome": "pass", "leak": false, "checks": ["phase_peak.eval < phase_peak.forward"]}
  },

  // Relations between variants: 8 kept graphs cost several training forwards' worth of saved tensors.
  "checks": ["pitfall.phase_peak.eval - fixed.phase_peak.eval >= 4 * fixed.forward_saved_bytes"]
}
)json";

Scenario Load(const std::string& text) {
  Scenario scenario;
  std::string error;
  EXPECT_TRUE(LoadScenarioText(text, "s.json", &scenario, &error)) << error;
  return scenario;
}

std::string LoadError(const std::string& text) {
  Scenario scenario;
  std::string error;
  EXPECT_FALSE(LoadScenarioText(text, "s.json", &scenario, &error)) << text;
  return error;
}

// A small valid scenario with `extra` top-level keys before its variants (which `extra` may replace).
std::string With(const std::string& extra, const std::string& variants = R"("variants": {"a": {}})") {
  std::string text = R"({"name": "t", "summary": "s", )";
  if (extra.find("\"model\"") == std::string::npos) {
    text += R"("model": {"layers": [{"kind": "linear", "in": 4, "out": 2}]}, )";
  }
  if (extra.find("\"data\"") == std::string::npos) text += R"("data": {"shape": [4]}, )";
  if (!extra.empty()) text += extra + ", ";
  return text + variants + "}";
}

TEST(ScenarioLoader, LoadsTheFormatExample) {
  Scenario s = Load(kExample);
  EXPECT_EQ(s.name, "forgotten-no-grad");
  EXPECT_EQ(s.file, "s.json");
  EXPECT_EQ(s.teach.substr(0, 26), "Outside torch::NoGradGuard");
  EXPECT_EQ(std::count(s.teach.begin(), s.teach.end(), '\n'), 2);
  EXPECT_EQ(s.backends, (std::vector<std::string>{"cpu", "meta", "cuda"}));
  EXPECT_EQ(s.card, "t4");
  ASSERT_EQ(s.variants.size(), 2u);
  EXPECT_EQ(s.variants[0].name, "pitfall");
  EXPECT_EQ(s.variants[1].name, "fixed");
  EXPECT_FALSE(s.variants[0].loop.eval.no_grad);
  EXPECT_TRUE(s.variants[1].loop.eval.no_grad);
  for (const VariantSpec& v : s.variants) {
    EXPECT_EQ(v.loop.eval.batches, 8);
    EXPECT_TRUE(v.loop.eval.keep_outputs);
    EXPECT_EQ(v.loop.optimizer.kind, "adam");
    EXPECT_EQ(v.model.layers.size(), 5u);
    EXPECT_EQ(v.data.classes, 10);
  }
  EXPECT_EQ(s.expectations.at("pitfall").checks, (std::vector<std::string>{"phase_peak.eval > phase_peak.forward"}));
  EXPECT_EQ(s.expectations.at("fixed").outcome, "pass");
  EXPECT_EQ(s.checks.size(), 1u);
}

TEST(ScenarioLoader, TheFormatPageShowsTheTestedExample) {
  // Not __FILE__: with CCACHE_BASEDIR (ci/build.sh) it is relative to the build folder.
  const std::string page_path = std::string(OOMGUARD_SOURCE_DIR) + "/scenarios/FORMAT.md";
  std::ifstream in(page_path);
  ASSERT_TRUE(in) << page_path;
  std::stringstream page;
  page << in.rdbuf();
  EXPECT_NE(page.str().find(kExample), std::string::npos) << "update FORMAT.md's example from kExample";
}

TEST(ScenarioLoader, FillsDefaults) {
  Scenario s = Load(With(""));
  EXPECT_EQ(s.backends, std::vector<std::string>{"cpu"});
  EXPECT_EQ(s.card, "");
  EXPECT_EQ(s.cap, "");
  EXPECT_EQ(s.teach, "");
  ASSERT_EQ(s.variants.size(), 1u);
  const VariantSpec& v = s.variants[0];
  EXPECT_EQ(v.name, "a");
  EXPECT_EQ(v.seed, 0);
  EXPECT_EQ(v.model.dtype, "float32");
  EXPECT_EQ(v.data.batch, 1);
  EXPECT_TRUE(v.data.on_host);
  EXPECT_EQ(v.loop.iterations, 2);
  EXPECT_EQ(v.loop.loss, "mean");
  EXPECT_EQ(v.loop.optimizer.kind, "sgd");
  EXPECT_EQ(v.loop.optimizer.lr, 1e-3);
  EXPECT_EQ(v.loop.eval.batches, 0);
  EXPECT_EQ(v.pitfalls.inplace.target, "none");
  EXPECT_EQ(v.pitfalls.transfer, "outside");
  EXPECT_TRUE(v.model.layers[0].bias);
  const VariantExpectation& e = s.expectations.at("a");  // every variant has one
  EXPECT_EQ(e.outcome, "pass");
  EXPECT_FALSE(e.leak);
  EXPECT_FALSE(e.xfail.has_value());
  EXPECT_TRUE(s.checks.empty());
}

TEST(ScenarioLoader, AVariantOverridingOneNestedFieldKeepsTheRestOfTheBase) {
  Scenario s = Load(With(R"("seed": 7, "loop": {"iterations": 3, "eval": {"batches": 2, "keep_outputs": true}})",
                         R"("variants": {"pitfall": {"loop": {"eval": {"no_grad": false}}}, "fixed": {}})"));
  const VariantSpec& pitfall = s.variants[0];
  EXPECT_EQ(pitfall.seed, 7);
  EXPECT_EQ(pitfall.loop.iterations, 3);
  EXPECT_EQ(pitfall.loop.eval.batches, 2);
  EXPECT_TRUE(pitfall.loop.eval.keep_outputs);
  EXPECT_FALSE(pitfall.loop.eval.no_grad);
  EXPECT_TRUE(s.variants[1].loop.eval.no_grad);
}

TEST(ScenarioLoader, AVariantReplacesArraysWholeAndNullRestoresADefault) {
  Scenario s = Load(With(
      R"("model": {"dtype": "bfloat16", "layers": [{"kind": "linear", "in": 4, "out": 8}, {"kind": "relu"},
                                                  {"kind": "linear", "in": 8, "out": 2}]},
         "loop": {"iterations": 5})",
      R"("variants": {"small": {"model": {"layers": [{"kind": "linear", "in": 4, "out": 3, "bias": false}]},
                                "loop": {"iterations": null}}})"));
  const VariantSpec& v = s.variants[0];
  ASSERT_EQ(v.model.layers.size(), 1u);
  EXPECT_EQ(v.model.layers[0].out, 3);
  EXPECT_FALSE(v.model.layers[0].bias);
  EXPECT_EQ(v.model.dtype, "bfloat16");
  EXPECT_EQ(v.loop.iterations, 2);
}

TEST(ScenarioLoader, ReadsTheScenarioKeys) {
  Scenario s = Load(With(R"("teach": "one line", "backends": ["meta"], "cap": "12GiB")"));
  EXPECT_EQ(s.teach, "one line");
  EXPECT_EQ(s.backends, std::vector<std::string>{"meta"});
  EXPECT_EQ(s.cap, "12GiB");
  EXPECT_EQ(Load(With(R"("cap": 1000000000)")).cap, "1000000000");
  Scenario e = Load(With(R"("expect": {"a": {"outcome": "error:inplace-saved-tensor", "leak": true,
                                              "checks": ["peak <= 1MiB"], "xfail": "issue 12"}})"));
  const VariantExpectation& a = e.expectations.at("a");
  EXPECT_EQ(a.outcome, "error:inplace-saved-tensor");
  EXPECT_TRUE(a.leak);
  EXPECT_EQ(a.checks, std::vector<std::string>{"peak <= 1MiB"});
  EXPECT_EQ(a.xfail, std::optional<std::string>("issue 12"));
}

TEST(ScenarioLoader, SyntaxErrorsGiveLineAndColumn) {
  EXPECT_EQ(LoadError("{\n  \"name\": \"t\"\n  \"summary\": \"s\"\n}\n"),
            "s.json:3:3: JSON syntax error: unexpected string literal; expected '}' (a comma missing before it?)");
  EXPECT_EQ(LoadError("{\n  \"name\": \"t\",\n  \"summary\": \"s\",\n}\n"),
            "s.json:3:17: JSON syntax error: trailing comma before '}' (JSON allows none)");
  EXPECT_EQ(LoadError("{\n  \"name\": tru\n}"),
            "s.json:2:11: JSON syntax error: invalid literal tru (strings need double quotes; the literals are true, "
            "false and null)");
  EXPECT_EQ(LoadError("{\"name\": \"t\""), "s.json:1:12: JSON syntax error: unexpected end of input; expected '}'");
  EXPECT_EQ(LoadError(""), "s.json:1:1: JSON syntax error: unexpected end of input; expected '[', '{', or a literal");
  EXPECT_EQ(LoadError("{\"summary\": \"\xc3\xa9t\xc3\xa9\" \"x\"}"),
            "s.json:1:19: JSON syntax error: unexpected string literal; expected '}' (a comma missing before it?)");
}

TEST(ScenarioLoader, AcceptsCommentsAndRejectsDuplicateKeys) {
  EXPECT_EQ(Load(With("/* block */ \"seed\": 3 // line\n")).variants.at(0).seed, 3);
  EXPECT_EQ(LoadError(With(R"("loop": {"iterations": 2, "iterations": 3})")),
            "s.json: at loop: duplicate key \"iterations\"");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "relu"}, {"kind": "relu", "kind": "gelu"}]})")),
            "s.json: at model.layers[1]: duplicate key \"kind\"");
}

TEST(ScenarioLoader, UnknownKeysSuggestTheNearestValidKey) {
  EXPECT_EQ(LoadError(With(R"("loop": {"eval": {"no_grd": true}})")),
            "s.json: at loop.eval: unknown key \"no_grd\"; did you mean \"no_grad\"? (valid keys: batches, no_grad, "
            "keep_outputs)");
  EXPECT_EQ(LoadError(With("", R"("variants": {"pitfall": {"loop": {"eval": {"no_grd": true}}}})")),
            "s.json: at variants.pitfall.loop.eval: unknown key \"no_grd\"; did you mean \"no_grad\"? (valid keys: "
            "batches, no_grad, keep_outputs)");
  EXPECT_EQ(LoadError(With("", R"("variants": {"a": {"lop": {}}})")),
            "s.json: at variants.a: unknown key \"lop\"; did you mean \"loop\"? (valid keys: model, data, loop, "
            "pitfalls, seed)");
  EXPECT_EQ(LoadError(With(R"("variant": {})")),
            "s.json: at top level: unknown key \"variant\"; did you mean \"variants\"? (valid keys: name, summary, "
            "teach, backends, card, cap, model, data, loop, pitfalls, seed, variants, expect, checks, estimate)");
  EXPECT_EQ(LoadError(With(R"("pitfalls": {"checkpointing": {}})")),
            "s.json: at pitfalls: unknown key \"checkpointing\"; did you mean \"checkpoint\"? (valid keys: inplace, "
            "retain_grad, keep_intermediates, checkpoint, transfer)");
  EXPECT_EQ(LoadError(With(R"("data": {"colour": 1})")),
            "s.json: at data: unknown key \"colour\" (valid keys: batch, shape, dtype, vocab, on_host, classes)");
}

TEST(ScenarioLoader, DottedKeysAreToldToNest) {
  EXPECT_EQ(LoadError(With(R"("loop": {"optimizer.kind": "adam"})")),
            "s.json: at loop: unknown key \"optimizer.kind\": nest it as \"optimizer\": {\"kind\": ...}");
  EXPECT_EQ(LoadError(With(R"("pitfalls.checkpoint.segments": 1)")),
            "s.json: at top level: unknown key \"pitfalls.checkpoint.segments\": nest it as \"pitfalls\": "
            "{\"checkpoint\": {\"segments\": ...}}");
  EXPECT_EQ(LoadError(With("", R"("variants": {"a": {"loop.eval": {"batches": 1}}})")),
            "s.json: at variants.a: unknown key \"loop.eval\": nest it as \"loop\": {\"eval\": ...}");
  EXPECT_EQ(LoadError(With(R"("expect": {"a.outcome": "oom"})")),
            "s.json: at expect: unknown variant \"a.outcome\": nest it as \"a\": {\"outcome\": ...}");
  EXPECT_EQ(LoadError(With(R"("loop": {"optimiser.kind": "adam"})")),
            "s.json: at loop: unknown key \"optimiser.kind\" (valid keys: iterations, loss, backward, retain_graph, "
            "optimizer, zero_grad, accumulate, eval, loss_history)");
}

TEST(ScenarioLoader, WrongTypesAndRangesSayWhatIsExpected) {
  EXPECT_EQ(LoadError(With(R"("data": {"batch": "32", "shape": [4]})")),
            "s.json: at data.batch: expected an integer >= 1, got string \"32\"");
  EXPECT_EQ(LoadError(With(R"("data": {"batch": 0, "shape": [4]})")),
            "s.json: at data.batch: expected an integer >= 1, got 0");
  EXPECT_EQ(LoadError(With(R"("data": {"batch": 2.5, "shape": [4]})")),
            "s.json: at data.batch: expected an integer >= 1, got 2.5");
  EXPECT_EQ(LoadError(With(R"("data": {"shape": [4, -1]})")),
            "s.json: at data.shape[1]: expected an integer >= 1, got -1");
  EXPECT_EQ(LoadError(With(R"("data": {"shape": []})")),
            "s.json: at data.shape: expected the shape of one sample, such as [512], got an array");
  EXPECT_EQ(LoadError(With(R"("loop": {"backward": "yes"})")),
            "s.json: at loop.backward: expected true or false, got string \"yes\"");
  EXPECT_EQ(LoadError(With(R"("loop": {"optimizer": {"lr": 0}})")),
            "s.json: at loop.optimizer.lr: expected a number > 0, got 0");
  EXPECT_EQ(LoadError(With(R"("loop": {"eval": null})")), "s.json: at loop.eval: expected an object, got null");
  EXPECT_EQ(LoadError(With(R"("seed": -1)")), "s.json: at seed: expected an integer >= 0, got -1");
  EXPECT_EQ(LoadError("[1]"), "s.json: at top level: expected an object, got an array");
}

TEST(ScenarioLoader, EnumerationsListTheValidValues) {
  EXPECT_EQ(LoadError(With(R"("loop": {"loss": "mae"})")),
            "s.json: at loop.loss: unknown loss \"mae\"; did you mean \"mse\"? (valid values: mean, mse, "
            "cross_entropy)");
  EXPECT_EQ(LoadError(With(R"("loop": {"loss": 3})")),
            "s.json: at loop.loss: expected one of mean, mse, cross_entropy, got 3");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "lienar", "in": 4, "out": 2}]})")),
            "s.json: at model.layers[0].kind: unknown layer kind \"lienar\"; did you mean \"linear\"? (valid values: "
            "linear, relu, gelu, sigmoid, tanh, exp, dropout, layer_norm, embedding, attention, mlp_block, "
            "transformer_block, scale)");
  EXPECT_EQ(LoadError(With(R"("pitfalls": {"inplace": {"op": "mul"}, "transfer": "within"})")),
            "s.json: at pitfalls.transfer: unknown transfer \"within\" (valid values: outside, inside)");
  EXPECT_EQ(LoadError(With(R"("data": {"shape": [4], "dtype": "float64"})")),
            "s.json: at data.dtype: unknown dtype \"float64\"; did you mean \"float32\"? (valid values: float32, "
            "bfloat16, float16, int64)");
  EXPECT_EQ(LoadError(With(R"("backends": ["cpu", "gpu"])")),
            "s.json: at backends[1]: unknown backend \"gpu\"; did you mean \"cpu\"? (valid values: cpu, meta, cuda)");
  EXPECT_EQ(LoadError(With(R"("expect": {"a": {"outcome": "OOM"}})")),
            "s.json: at expect.a.outcome: unknown outcome \"OOM\"; did you mean \"oom\"? (valid values: pass, oom, "
            "error:inplace-saved-tensor, error:inplace-leaf, error:meta-kernel-missing, error:error (any other error))");
  EXPECT_EQ(LoadError(With(R"("expect": {"a": {"outcome": 1}})")),
            "s.json: at expect.a.outcome: expected one of pass, oom, error:inplace-saved-tensor, error:inplace-leaf, "
            "error:meta-kernel-missing, error:error (any other error), got 1");
  EXPECT_EQ(Load(With(R"("expect": {"a": {"outcome": "error:error"}})")).expectations.at("a").outcome, "error:error");
}

TEST(ScenarioLoader, LayersTakeOnlyTheFieldsOfTheirKind) {
  EXPECT_EQ(
      LoadError(With(R"("model": {"layers": [{"kind": "linear", "in": 4, "out": 4}, {"kind": "relu", "out": 3}]})")),
      "s.json: at model.layers[1]: layer kind relu takes no field \"out\" (it takes: inplace)");
  EXPECT_EQ(LoadError(With(
                R"("model": {"layers": [{"kind": "linear", "in": 4, "out": 4}, {"kind": "exp", "inplace": true}]})")),
            "s.json: at model.layers[1]: layer kind exp takes no field \"inplace\" (it takes no fields)");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "linear", "in": 4, "ot": 4}]})")),
            "s.json: at model.layers[0]: unknown key \"ot\"; did you mean \"out\"? (valid keys: kind, repeat, in, out, bias)");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "linear", "in": 4}]})")),
            "s.json: at model.layers[0]: missing required key \"out\" (layer kind linear requires: in, out)");
  EXPECT_EQ(
      LoadError(With(R"("model": {"layers": [{"in": 4}]})")),
      "s.json: at model.layers[0]: missing required key \"kind\" (one of: linear, relu, gelu, sigmoid, tanh, exp, "
      "dropout, layer_norm, embedding, attention, mlp_block, transformer_block, scale)");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "dropout", "p": 1.0}]})")),
            "s.json: at model.layers[0].p: expected a number in [0, 1), got 1.0");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "attention", "dim": 4, "heads": 3}]})")),
            "s.json: at model.layers[0].heads: 3 heads do not divide dim 4 (each head gets dim / heads features)");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": []})")), "s.json: at model.layers: a model needs at least one layer");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": ["relu"]})")),
            "s.json: at model.layers[0]: expected a layer such as {\"kind\": \"relu\"}, got string \"relu\"");
}

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
  EXPECT_EQ(LoadError(With(R"("model": null)")), "s.json: at model: expected an object, got null");
  EXPECT_EQ(LoadError(With("", R"("variants": {"a": {"model": null}})")),
            "s.json: at variants.a.model.layers: a model needs at least one layer");
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
            "s.json: at checks[0]: expected a check expression such as \"pitfall.peak >= 2 * fixed.peak\", got 3");
  EXPECT_EQ(LoadError(With(R"("expect": {"fixed": {"leak": "no"}})", two)),
            "s.json: at expect.fixed.leak: expected true or false, got string \"no\"");
  EXPECT_EQ(LoadError(With(R"("expect": {"fixed": {"xfail": ""}})", two)),
            "s.json: at expect.fixed.xfail: expected a non-empty string, got string \"\"");
  EXPECT_EQ(LoadError(With(R"("expect": {"fixed": {"outcom": "oom"}})", two)),
            "s.json: at expect.fixed: unknown key \"outcom\"; did you mean \"outcome\"? (valid keys: outcome, leak, "
            "checks, xfail)");
  Scenario s = Load(With(R"("checks": ["pitfall.peak >= 2 * fixed.peak", "pitfall.grads != fixed.grads"])", two));
  EXPECT_EQ(s.checks.size(), 2u);
}

TEST(ScenarioLoader, ScenarioKeysAreValidated) {
  EXPECT_EQ(LoadError(R"({"summary": "s", "variants": {"a": {}}})"),
            "s.json: at top level: missing required key \"name\" (a name such as \"forgotten-no-grad\")");
  EXPECT_EQ(LoadError(R"({"name": "t", "variants": {"a": {}}})"),
            "s.json: at top level: missing required key \"summary\" (one line: what the scenario shows)");
  EXPECT_EQ(LoadError(R"({"name": "t", "summary": "s"})"),
            "s.json: at top level: missing required key \"variants\" (named merge patches over the base, e.g. "
            "{\"base\": {}})");
  EXPECT_EQ(LoadError(R"({"name": "Forgotten No Grad"})"),
            "s.json: at name: expected a name of lowercase letters, digits, '-' and '_' that starts with a letter or "
            "digit, such as \"forgotten-no-grad\", got string \"Forgotten No Grad\"");
  EXPECT_EQ(LoadError(R"({"name": "t", "summary": ""})"),
            "s.json: at summary: expected a non-empty string, got string \"\"");
  EXPECT_EQ(LoadError(With(R"("teach": ["a", 2])")), "s.json: at teach[1]: expected a string, got 2");
  EXPECT_EQ(LoadError(With(R"("backends": ["cpu", "cpu"])")),
            "s.json: at backends[1]: backend \"cpu\" is listed twice");
  EXPECT_EQ(LoadError(With(R"("backends": [])")),
            "s.json: at backends: expected an array of backends such as [\"cpu\", \"meta\"], got an array");
  EXPECT_EQ(LoadError(With(R"("card": "t4", "cap": "12GiB")")), "s.json: at cap: give either card or cap, not both");
  EXPECT_EQ(LoadError(With(R"("cap": "12XB")")),
            "s.json: at cap: invalid size '12XB': unknown unit 'XB'; expected a size such as 16GiB, 15.5GB, 512MiB, "
            "4096 or 1e9 (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  EXPECT_EQ(LoadError(With(R"("cap": 0)")), "s.json: at cap: expected a size > 0, got 0");
  EXPECT_EQ(LoadError(With(R"("card": "t5")")).substr(0, 38), "s.json: at card: unknown card 't5'; kn");
  EXPECT_EQ(LoadError(With("", R"("variants": {})")),
            "s.json: at variants: expected an object of named variants such as {\"pitfall\": {}, \"fixed\": {...}}, "
            "got an object");
  EXPECT_EQ(LoadError(With("", R"("variants": {"Fixed": {}})")),
            "s.json: at variants: invalid variant name \"Fixed\": use lowercase letters, digits and '_', not starting "
            "with a digit");
  EXPECT_EQ(LoadError(With("", R"("variants": {"a": []})")),
            "s.json: at variants.a: expected an object (a merge patch over the base; {} runs the base as it is), got "
            "an array");
}

// A temporary folder with a subfolder "sub", removed at the end of the test. POSIX calls, not
// std::filesystem: see Note [No std::filesystem] in harness/runner.cpp.
class TempFolder {
 public:
  TempFolder() {
    char name[] = "/tmp/oomguard_loader_XXXXXX";
    path_ = mkdtemp(name);
    mkdir((path_ + "/sub").c_str(), 0700);
  }
  ~TempFolder() {
    for (const std::string& dir : {path_ + "/sub", path_}) {
      if (DIR* d = opendir(dir.c_str())) {
        while (const dirent* entry = readdir(d)) unlink((dir + "/" + entry->d_name).c_str());
        closedir(d);
      }
      rmdir(dir.c_str());
    }
  }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ + "/" + name) << text;
    return path_ + "/" + name;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ScenarioLoader, FindsTheJsonFilesDirectlyInsideFolders) {
  TempFolder folder;
  const std::string b = folder.Write("b.json", "{}");
  const std::string a = folder.Write("a.json", "{}");
  folder.Write("FORMAT.md", "# format");
  folder.Write("sub/c.json", "{}");
  const std::string other = folder.Write("sub/other.txt", "{}");
  std::vector<std::string> files;
  std::string error;
  ASSERT_TRUE(FindScenarioFiles({folder.path(), other, a}, &files, &error)) << error;
  EXPECT_EQ(files, (std::vector<std::string>{a, b, other}));
  EXPECT_FALSE(FindScenarioFiles({folder.path() + "/missing.json"}, &files, &error));
  EXPECT_EQ(error, folder.path() + "/missing.json: no such file or folder");
}

TEST(ScenarioLoader, LoadsFilesAndNamesTheFileInErrors) {
  TempFolder folder;
  const std::string good = folder.Write("good.json", kExample);
  const std::string bad = folder.Write("bad.json", With(R"("seed": "x")"));
  Scenario s;
  std::string error;
  ASSERT_TRUE(LoadScenarioFile(good, &s, &error)) << error;
  EXPECT_EQ(s.file, good);
  EXPECT_FALSE(LoadScenarioFile(bad, &s, &error));
  EXPECT_EQ(error, bad + ": at seed: expected an integer >= 0, got string \"x\"");
  EXPECT_EQ(s.file, good);  // unchanged by a failed load
  EXPECT_FALSE(LoadScenarioFile(folder.path() + "/none.json", &s, &error));
  EXPECT_EQ(error, folder.path() + "/none.json: cannot read: No such file or directory");
  const std::string empty = folder.Write("empty.json", "");
  EXPECT_FALSE(LoadScenarioFile(empty, &s, &error));
  EXPECT_EQ(error, empty + ":1:1: JSON syntax error: unexpected end of input; expected '[', '{', or a literal");
  EXPECT_FALSE(LoadScenarioFile(folder.path(), &s, &error));
  EXPECT_EQ(error, folder.path() + ": is a folder, not a scenario file");
}

}  // namespace
}  // namespace oomguard
