// The scenario loader's error messages for one bad value at a time: JSON syntax, unknown and
// misplaced keys, wrong types, ranges and enumerations, layer fields, and the scenario's own keys.
// Each message is compared whole (STYLE.md 10).
#include <gtest/gtest.h>

#include "base/did_you_mean.h"
#include "model/layer_kinds.h"
#include "scenario/scenario_loader.h"
#include "tests/scenario_text.h"

namespace oomguard {
namespace {

using testing::Load;
using testing::LoadError;

// Every layer kind in table order, as the loader lists them: the table (model/layer_kinds.h) is the one
// place a kind is declared, so these tests pin the message around the list, not its entries.
std::string KindList() { return JoinNames(LayerKindNames(), ", "); }
using testing::With;

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
            "pitfalls, parallel, seed, workload, knobs)");
  EXPECT_EQ(
      LoadError(With(R"("variant": {})")),
      "s.json: at top level: unknown key \"variant\"; did you mean \"variants\"? (valid keys: name, summary, "
      "teach, backends, card, cap, model, data, loop, pitfalls, parallel, seed, workload, knobs, variants, expect, "
      "checks, estimate)");
  EXPECT_EQ(LoadError(With(R"("pitfalls": {"checkpointing": {}})")),
            "s.json: at pitfalls: unknown key \"checkpointing\"; did you mean \"checkpoint\"? (valid keys: inplace, "
            "retain_grad, keep_intermediates, checkpoint, transfer)");
  EXPECT_EQ(
      LoadError(With(R"("data": {"colour": 1})")),
      "s.json: at data: unknown key \"colour\" (valid keys: batch, shape, dtype, vocab, on_host, classes, inputs)");
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
            "optimizer, zero_grad, accumulate, autocast, clip_grad_norm, eval, loss_history)");
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
            "s.json: at data.shape: expected the shape of one sample, such as [512], got an empty array");
  EXPECT_EQ(LoadError(With(R"("loop": {"backward": "yes"})")),
            "s.json: at loop.backward: expected true or false, got string \"yes\"");
  EXPECT_EQ(LoadError(With(R"("loop": {"optimizer": {"lr": 0}})")),
            "s.json: at loop.optimizer.lr: expected a number > 0, at most 1e18 (the optimizer computes with it in float), "
            "got 0");
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
            "s.json: at model.layers[0].kind: unknown layer kind \"lienar\"; did you mean \"linear\"? (valid values: " +
                KindList() + ")");
  EXPECT_EQ(LoadError(With(R"("pitfalls": {"inplace": {"op": "mul"}, "transfer": "within"})")),
            "s.json: at pitfalls.transfer: unknown transfer \"within\" (valid values: outside, inside)");
  EXPECT_EQ(LoadError(With(R"("data": {"shape": [4], "dtype": "float64"})")),
            "s.json: at data.dtype: unknown dtype \"float64\"; did you mean \"float32\"? (valid values: float32, "
            "bfloat16, float16, int64, bool)");
  EXPECT_EQ(LoadError(With(R"("backends": ["cpu", "gpu"])")),
            "s.json: at backends[1]: unknown backend \"gpu\"; did you mean \"cpu\"? (valid values: cpu, meta, cuda)");
  EXPECT_EQ(
      LoadError(With(R"("expect": {"a": {"outcome": "OOM"}})")),
      "s.json: at expect.a.outcome: unknown outcome \"OOM\"; did you mean \"oom\"? (valid values: pass, oom, "
      "error:inplace-saved-tensor, error:inplace-leaf, error:meta-kernel-missing, error:error (any other error))");
  EXPECT_EQ(LoadError(With(R"("expect": {"a": {"outcome": 1}})")),
            "s.json: at expect.a.outcome: expected one of pass, oom, error:inplace-saved-tensor, error:inplace-leaf, "
            "error:meta-kernel-missing, error:error (any other error), got 1");
  EXPECT_EQ(Name(Load(With(R"("expect": {"a": {"outcome": "error:error"}})")).expectations.at("a").outcome),
            "error:error");
}

TEST(ScenarioLoader, LayersTakeOnlyTheFieldsOfTheirKind) {
  EXPECT_EQ(
      LoadError(With(R"("model": {"layers": [{"kind": "linear", "in": 4, "out": 4}, {"kind": "relu", "out": 3}]})")),
      "s.json: at model.layers[1]: layer kind relu takes no field \"out\" (it takes: inplace)");
  EXPECT_EQ(LoadError(With(
                R"("model": {"layers": [{"kind": "linear", "in": 4, "out": 4}, {"kind": "exp", "inplace": true}]})")),
            "s.json: at model.layers[1]: layer kind exp takes no field \"inplace\" (it takes no fields)");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "linear", "in": 4, "ot": 4}]})")),
            "s.json: at model.layers[0]: unknown key \"ot\"; did you mean \"out\"? (valid keys: kind, repeat, in, out, "
            "bias)");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "linear", "in": 4}]})")),
            "s.json: at model.layers[0]: missing required key \"out\" (layer kind linear requires: in, out)");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"in": 4}]})")),
            "s.json: at model.layers[0]: missing required key \"kind\" (one of: " + KindList() + ")");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "dropout", "p": 1.0}]})")),
            "s.json: at model.layers[0].p: expected a number in [0, 1), got 1.0");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "attention", "dim": 4, "heads": 3}]})")),
            "s.json: at model.layers[0].heads: 3 heads do not divide dim 4 (each head gets dim / heads features)");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": []})")), "s.json: at model.layers: a model needs at least one layer");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": ["relu"]})")),
            "s.json: at model.layers[0]: expected a layer such as {\"kind\": \"relu\"}, got string \"relu\"");
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
            "s.json: at backends: expected an array of backends such as [\"cpu\", \"meta\"], got an empty array");
  EXPECT_EQ(LoadError(With(R"("card": "t4", "cap": "12GiB")")), "s.json: at cap: give either card or cap, not both");
  EXPECT_EQ(LoadError(With(R"("cap": "12XB")")),
            "s.json: at cap: invalid size '12XB': unknown unit 'XB'; expected a size such as 16GiB, 15.5GB, 512MiB, "
            "4096 or 1e9 (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  EXPECT_EQ(LoadError(With(R"("cap": 0)")), "s.json: at cap: expected a size > 0, got 0");
  EXPECT_EQ(LoadError(With(R"("card": "t5")")).substr(0, 38), "s.json: at card: unknown card 't5'; kn");
  EXPECT_EQ(LoadError(With("", R"("variants": {})")),
            "s.json: at variants: expected an object of named variants such as {\"pitfall\": {}, \"fixed\": {...}}, "
            "got an empty object");
  EXPECT_EQ(LoadError(With("", R"("variants": {"Fixed": {}})")),
            "s.json: at variants: invalid variant name \"Fixed\": use lowercase letters, digits and '_', not starting "
            "with a digit");
  EXPECT_EQ(LoadError(With("", R"("variants": {"a": []})")),
            "s.json: at variants.a: expected an object (a merge patch over the base; {} runs the base as it is), got "
            "an empty array");
}

}  // namespace
}  // namespace oomguard
