// A variant alone, as the loader writes it for a spawned child (Note [Parse once],
// scenario/variant_resolution.h): loaded back, it is the same VariantSpec, for every variant of the
// catalog, and its text is exactly the merged base with the variant's empty patch.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "scenario/scenario_loader.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

Scenario Load(const std::string& text, const std::string& label) {
  Scenario scenario;
  std::string error;
  EXPECT_TRUE(LoadScenarioText(text, label, &scenario, &error)) << error;
  return scenario;
}

// The document loaded from another folder: one variant, which the caller compares.
VariantSpec Reloaded(const VariantSpec& spec) {
  const Scenario alone = Load(spec.document, "/tmp/elsewhere/0.variant.json");
  EXPECT_EQ(alone.variants.size(), 1u) << spec.document;
  return alone.variants.empty() ? VariantSpec{} : alone.variants[0];
}

TEST(VariantDocument, IsTheMergedBaseWithTheVariantsEmptyPatchAndNoChecks) {
  const Scenario s = Load(R"({
    "name": "tiny", "summary": "a tiny model", "teach": "left out", "card": "a10",
    "model": {"layers": [{"kind": "linear", "in": 4, "out": 8}, {"kind": "relu"}]},
    "data": {"batch": 3, "shape": [4]},
    "loop": {"iterations": 2, "optimizer": {"kind": "sgd"}},
    "variants": {"base": {}, "wider": {"data": {"batch": 6}, "loop": {"optimizer": null}}},
    "expect": {"wider": {"checks": ["peak < 1MiB"]}},
    "checks": ["wider.peak > base.peak"]
  })",
                          "/s/tiny.json");
  ASSERT_EQ(s.variants.size(), 2u);
  EXPECT_EQ(s.variants[1].document,
            R"({"name":"tiny","summary":"a tiny model","backends":["cpu"],"card":"a10",)"
            R"("model":{"layers":[{"kind":"linear","in":4,"out":8},{"kind":"relu"}]},"data":{"batch":6,"shape":[4]},)"
            R"("loop":{"iterations":2},"variants":{"wider":{}}})");
  for (const VariantSpec& v : s.variants) EXPECT_EQ(Reloaded(v), v) << v.name;
}

TEST(VariantDocument, ACapIsKeptAsWritten) {
  const Scenario s = Load(R"({"name": "c", "summary": "s", "cap": 1000000000,
    "model": {"layers": [{"kind": "relu"}]}, "data": {"shape": [4]}, "variants": {"base": {}}})",
                          "c.json");
  EXPECT_EQ(s.variants[0].document,
            R"({"name":"c","summary":"s","backends":["cpu"],"cap":"1000000000","model":{"layers":[{"kind":"relu"}]},)"
            R"("data":{"shape":[4]},"variants":{"base":{}}})");
  const Scenario alone = Load(s.variants[0].document, "/tmp/elsewhere/0.variant.json");
  EXPECT_EQ(alone.cap, "1000000000");
  EXPECT_EQ(alone.variants[0], s.variants[0]);
}

// The scratch folder is not the scenario's: the module's path is written absolute.
TEST(VariantDocument, ATorchScriptPathIsWrittenAbsolute) {
  testing::ScratchFolder folder("variant-document");
  folder.Write("model.pt", "not read by the loader");
  const std::string file = folder.Write("s.json", R"({"name": "ts", "summary": "s",
    "model": {"torchscript": "model.pt"}, "data": {"batch": 2, "shape": [4]}, "variants": {"base": {}}})");
  Scenario s;
  std::string error;
  ASSERT_TRUE(LoadScenarioFile(file, &s, &error)) << error;
  char* real = realpath((folder.path() + "/model.pt").c_str(), nullptr);
  ASSERT_NE(real, nullptr);
  const std::string absolute = real;
  free(real);
  EXPECT_NE(s.variants[0].document.find(R"("torchscript":")" + absolute + "\""), std::string::npos)
      << s.variants[0].document;
  VariantSpec reloaded = Reloaded(s.variants[0]);
  EXPECT_EQ(reloaded.model.torchscript, absolute);
  EXPECT_EQ(reloaded.model.source, "torchscript");
  reloaded.model.torchscript = s.variants[0].model.torchscript;  // as resolved against s.json's folder
  EXPECT_EQ(reloaded, s.variants[0]);
}

TEST(VariantDocument, EveryCatalogVariantLoadsBackAsItself) {
  std::vector<std::string> files;
  std::string error;
  ASSERT_TRUE(FindScenarioFiles({std::string(OOMGUARD_SOURCE_DIR) + "/scenarios"}, &files, &error)) << error;
  size_t variants = 0;
  for (const std::string& file : files) {
    Scenario s;
    ASSERT_TRUE(LoadScenarioFile(file, &s, &error)) << error;
    for (const VariantSpec& v : s.variants) {
      const VariantSpec again = Reloaded(v);
      EXPECT_EQ(again.document, v.document) << file << ": " << v.name;
      EXPECT_EQ(again, v) << file << ": " << v.name;
      ++variants;
    }
  }
  EXPECT_GE(variants, 50u);
}

}  // namespace
}  // namespace oomguard
