// Golden-file tests of the JUnit XML writer, plus exact checks of what CI relies on.
//
// The golden file is tests/golden/sample.junit.xml, rendered from oomguard::testing::SampleReport() and
// compared byte for byte. After an intended change of format, rewrite it with
//
//   OOMGUARD_UPDATE_GOLDEN=1 build/tests/oomguard_plain_tests --gtest_filter='JUnit*'
//
// and review the diff. The XML is also checked by a small structural reader here (well-formed, the
// attributes CI reporters require, counts that add up) and, where xmllint (Debian libxml2-utils) is
// installed, by `xmllint --noout` and against tests/golden/junit-10.xsd.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "reports/junit_writer.h"
#include "tests/golden_file.h"
#include "tests/report_fixture.h"

namespace oomguard {
namespace {

std::string GoldenPath(const std::string& name) { return std::string(OOMGUARD_SOURCE_DIR) + "/tests/golden/" + name; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// A minimal XML reader for structure checks. It refuses what no well-formed document contains: unbalanced
// or crossed tags, unquoted or repeated attributes, a '<' in a value, an '&' that starts no entity.
struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;  // values as written, entities unexpanded
  std::vector<Element> children;
};

class XmlReader {
 public:
  explicit XmlReader(const std::string& xml) : xml_(xml) {}

  bool Read(Element* root, std::string* error) {
    if (xml_.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0) != 0) return Fail("no XML declaration", error);
    pos_ = xml_.find('\n') + 1;
    if (!ReadElement(root, error)) return false;
    while (pos_ < xml_.size() && std::isspace(static_cast<unsigned char>(xml_[pos_]))) ++pos_;
    return pos_ == xml_.size() || Fail("content after the root element", error);
  }

 private:
  bool Fail(const std::string& what, std::string* error) {
    *error = what + " at offset " + std::to_string(pos_);
    return false;
  }
  bool Entity() {
    static const std::regex kEntity("^&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);");
    std::smatch match;
    const std::string rest = xml_.substr(pos_, 12);
    if (!std::regex_search(rest, match, kEntity)) return false;
    pos_ += match.length(0);
    return true;
  }
  std::string Name() {
    const size_t start = pos_;
    while (pos_ < xml_.size() && (std::isalnum(static_cast<unsigned char>(xml_[pos_])) || xml_[pos_] == '-' ||
                                  xml_[pos_] == '_' || xml_[pos_] == ':' || xml_[pos_] == '.')) {
      ++pos_;
    }
    return xml_.substr(start, pos_ - start);
  }
  void Spaces() {
    while (pos_ < xml_.size() && std::isspace(static_cast<unsigned char>(xml_[pos_]))) ++pos_;
  }
  bool ReadElement(Element* e, std::string* error) {
    if (xml_[pos_++] != '<' || (e->name = Name()).empty()) return Fail("expected a start tag", error);
    for (;;) {
      Spaces();
      if (xml_.compare(pos_, 2, "/>") == 0) return pos_ += 2, true;
      if (xml_.compare(pos_, 1, ">") == 0) break;
      const std::string attribute = Name();
      if (attribute.empty() || xml_.compare(pos_, 2, "=\"") != 0) return Fail("malformed attribute", error);
      pos_ += 2;
      const size_t start = pos_;
      while (pos_ < xml_.size() && xml_[pos_] != '"') {
        if (xml_[pos_] == '&') {
          if (!Entity()) return Fail("'&' that starts no entity in a value", error);
        } else if (xml_[pos_++] == '<') {
          return Fail("raw '<' in a value", error);
        }
      }
      if (pos_ >= xml_.size()) return Fail("unterminated attribute", error);
      if (!e->attributes.emplace(attribute, xml_.substr(start, pos_ - start)).second) {
        return Fail("repeated attribute " + attribute, error);
      }
      ++pos_;
    }
    ++pos_;
    while (pos_ < xml_.size()) {
      if (xml_.compare(pos_, 2, "</") == 0) {
        pos_ += 2;
        if (Name() != e->name) return Fail("end tag does not match <" + e->name + ">", error);
        Spaces();
        if (xml_.compare(pos_, 1, ">") != 0) return Fail("malformed end tag", error);
        return ++pos_, true;
      }
      if (xml_[pos_] == '<') {
        if (!ReadElement(&e->children.emplace_back(), error)) return false;
      } else if (xml_[pos_] == '&') {
        if (!Entity()) return Fail("'&' that starts no entity", error);
      } else {
        ++pos_;
      }
    }
    return Fail("unclosed <" + e->name + ">", error);
  }

  const std::string& xml_;
  size_t pos_ = 0;
};

// The checks a schema would make that CI reporters depend on; returns the problems found.
std::vector<std::string> JUnitProblems(const std::string& xml) {
  std::vector<std::string> problems;
  Element root;
  std::string error;
  if (!XmlReader(xml).Read(&root, &error)) return {error};
  const std::regex time("[0-9]+\\.[0-9]{3}");
  const auto require = [&](const Element& e, const std::vector<std::string>& names) {
    for (const std::string& name : names) {
      if (!e.attributes.count(name)) problems.push_back("<" + e.name + "> without " + name);
    }
    if (e.attributes.count("time") && !std::regex_match(e.attributes.at("time"), time)) {
      problems.push_back("<" + e.name + "> time " + e.attributes.at("time"));
    }
  };
  if (root.name != "testsuites") problems.push_back("root is <" + root.name + ">");
  require(root, {"tests", "failures", "errors", "time"});
  if (root.attributes.count("skipped")) problems.push_back("<testsuites> with skipped (not in junit-10.xsd)");
  std::map<std::string, int> total;
  for (const Element& suite : root.children) {
    if (suite.name != "testsuite") problems.push_back("<" + suite.name + "> in <testsuites>");
    require(suite, {"name", "tests", "failures", "errors", "skipped", "time"});
    std::map<std::string, int> counts;
    for (const Element& test : suite.children) {
      if (test.name == "properties" && &test == &suite.children.front()) {  // a sharded run's: first, if at all
        for (const Element& property : test.children) {
          if (property.name != "property") problems.push_back("<" + property.name + "> in <properties>");
          require(property, {"name", "value"});
        }
        continue;
      }
      if (test.name != "testcase") problems.push_back("<" + test.name + "> in <testsuite>");
      require(test, {"classname", "name", "time"});
      ++counts["tests"];
      for (const Element& child : test.children) {
        if (child.name == "failure" || child.name == "error" || child.name == "skipped") {
          require(child, {"message", "type"});
          ++counts[child.name == "failure" ? "failures" : child.name == "error" ? "errors" : "skipped"];
        } else if (child.name != "system-out") {
          problems.push_back("<" + child.name + "> in <testcase>");
        }
      }
    }
    for (const char* count : {"tests", "failures", "errors", "skipped"}) {
      if (suite.attributes.count(count) && suite.attributes.at(count) != std::to_string(counts[count])) {
        problems.push_back(suite.attributes.at("name") + ": " + count + " says " + suite.attributes.at(count) +
                           ", counted " + std::to_string(counts[count]));
      }
      total[count] += counts[count];
    }
  }
  for (const char* count : {"tests", "failures", "errors", "skipped"}) {
    if (root.attributes.count(count) && root.attributes.at(count) != std::to_string(total[count])) {
      problems.push_back(std::string("<testsuites> ") + count + " says " + root.attributes.at(count));
    }
  }
  return problems;
}

bool HaveXmllint() { return std::system("command -v xmllint >/dev/null 2>&1") == 0; }

// Feeds xml to `xmllint ARGS -` and returns its exit status; its messages go to the test's stderr.
int Xmllint(const std::string& args, const std::string& xml) {
  FILE* pipe = popen(("xmllint " + args + " -").c_str(), "w");
  if (pipe == nullptr) return -1;
  std::fwrite(xml.data(), 1, xml.size(), pipe);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(JUnit, SampleMatchesGoldenFile) {
  const std::string xml = RenderJUnit(testing::SampleReport());
  testing::ExpectMatchesGolden("sample.junit.xml", xml);
}

TEST(JUnit, SampleTotalsAndMapping) {
  const std::string xml = RenderJUnit(testing::SampleReport());
  EXPECT_NE(xml.find("\n<testsuites name=\"oomguard\" tests=\"8\" failures=\"2\" errors=\"1\" "
                     "time=\"4.200\">\n"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testsuite name=\"bad&amp;name&lt;&quot;x&quot;&gt;\" tests=\"3\" failures=\"2\" errors=\"0\" "
                     "skipped=\"0\" time=\"0.900\" file=\"scenarios/bad&amp;name.json\">"),
            std::string::npos);
  EXPECT_NE(
      xml.find("<testcase classname=\"oomguard.bad&amp;name&lt;&quot;x&quot;&gt;\" name=\"a&lt;b&gt;&amp;c "
               "[cpu, NVIDIA T4 16GB]\" time=\"0.250\">\n      <failure message=\"regression: peak_bytes 18.00 MiB "
               "vs baseline 16.20 MiB (+1.80 MiB, +11.11%)\" type=\"FAIL\">"),
      std::string::npos);
  EXPECT_NE(xml.find("  peak_bytes: baseline 16.20 MiB, current 18.00 MiB, delta +1.80 MiB (+11.1%), regressed\n"),
            std::string::npos);
  EXPECT_NE(xml.find("name=\"(checks)\" time=\"0.000\">\n      <failure message=\"a.peak &gt; 2 * new_variant.peak: "
                     "18.00 MiB &gt; 2 * 9.00 MiB (18.00 MiB)\" type=\"FAIL\">"),
            std::string::npos);
  EXPECT_NE(xml.find("name=\"(scenario)\" time=\"0.000\">\n      <error message=\"scenarios/broken.json:3:14: JSON "
                     "syntax error: unexpected &apos;o&apos;\" type=\"UNRESOLVED\">"),
            std::string::npos);
  EXPECT_NE(xml.find("<skipped message=\"runs on cuda, not cpu\" type=\"UNSUPPORTED\">"), std::string::npos);
  EXPECT_EQ(xml.find("timestamp"), std::string::npos);
  EXPECT_EQ(xml.find("hostname"), std::string::npos);
}

TEST(JUnit, ASnapshotIsAnAttachmentOfItsTestCase) {
  RunResults report = testing::SampleReport();
  report.scenarios[0].variants[0].measurement->snapshot = "snaps/a&b.pitfall.cpu.pickle";
  const std::string xml = RenderJUnit(report);
  EXPECT_NE(xml.find("memory_viz snapshot: [[ATTACHMENT|snaps/a&amp;b.pitfall.cpu.pickle]]</system-out>"),
            std::string::npos)
      << xml;
  EXPECT_EQ(RenderJUnit(testing::SampleReport()).find("ATTACHMENT"), std::string::npos);
}

TEST(JUnit, NastyNamesAreEscapedNeverRaw) {
  const std::string xml = RenderJUnit(testing::SampleReport());
  EXPECT_NE(xml.find("name=\"bad&amp;name&lt;&quot;x&quot;&gt;\""), std::string::npos);
  EXPECT_NE(xml.find("name=\"a&lt;b&gt;&amp;c [cpu, NVIDIA T4 16GB]\""), std::string::npos);
  for (const char* raw : {"bad&name", "<\"x\">", "a<b>&c", "<b>", "peak <= 16MiB"}) {
    EXPECT_EQ(xml.find(raw), std::string::npos) << raw;
  }
}

TEST(JUnit, EveryResultCodeMapsToItsElement) {
  RunResults report = testing::SampleReport();
  report.scenarios.resize(1);
  ScenarioResult& s = report.scenarios[0];
  s.checks.clear();
  s.variants.resize(5);
  const ResultCode codes[] = {ResultCode::kXPass, ResultCode::kXFail, ResultCode::kTimeout, ResultCode::kSkipped,
                              ResultCode::kUnresolved};
  for (int i = 0; i < 5; ++i) {
    s.variants[i].name = "v" + std::to_string(i);
    s.variants[i].code = codes[i];
    s.variants[i].reasons = {"reason " + std::to_string(i)};
  }
  s.variants[1].xfail_reason = "known to OOM";
  const std::string xml = RenderJUnit(report);
  EXPECT_NE(xml.find("<failure message=\"reason 0\" type=\"XPASS\">"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<skipped message=\"xfail: known to OOM\" type=\"XFAIL\">reason 1</skipped>"), std::string::npos);
  EXPECT_NE(xml.find("<error message=\"reason 2\" type=\"TIMEOUT\">"), std::string::npos);
  EXPECT_NE(xml.find("<skipped message=\"reason 3\" type=\"SKIPPED\">reason 3</skipped>"), std::string::npos);
  EXPECT_NE(xml.find("<error message=\"reason 4\" type=\"UNRESOLVED\">"), std::string::npos);
  EXPECT_NE(xml.find("<testsuites name=\"oomguard\" tests=\"5\" failures=\"1\" errors=\"2\" time="), std::string::npos);
  EXPECT_EQ(JUnitProblems(xml), std::vector<std::string>{});
}

// What --filter did not select follows what ran: one suite each, its "(scenario)" case <skipped/>.
TEST(JUnit, SkippedScenariosAreSkippedSuitesAfterTheRest) {
  RunResults report = testing::SampleReport();
  report.scenarios.resize(1);
  ScenarioResult skipped;
  skipped.name = "not-me";
  skipped.file = "/s/not-me.json";
  skipped.backend = "cpu";
  skipped.code = ResultCode::kSkipped;
  skipped.error = "not selected by --filter 'a*'";
  report.skipped = {skipped};
  const std::string xml = RenderJUnit(report);
  const std::string suite =
      "  <testsuite name=\"not-me\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"1\" time=\"0.000\" "
      "file=\"/s/not-me.json\">\n"
      "    <testcase classname=\"oomguard.not-me\" name=\"(scenario)\" time=\"0.000\">\n"
      "      <skipped message=\"not selected by --filter &apos;a*&apos;\" type=\"SKIPPED\">not selected by --filter "
      "&apos;a*&apos;</skipped>\n"
      "      <system-out>file: /s/not-me.json</system-out>\n"
      "    </testcase>\n"
      "  </testsuite>\n"
      "</testsuites>\n";
  ASSERT_GE(xml.size(), suite.size());
  EXPECT_EQ(xml.substr(xml.size() - suite.size()), suite) << xml;
  EXPECT_EQ(JUnitProblems(xml), std::vector<std::string>{});
}

// A shard's file names its shard on the root and in every suite, and is otherwise the unsharded file, so
// that the merged files of a CI matrix tell their shards apart.
TEST(JUnit, AShardIsNamedOnTheRootAndAPropertyOfEverySuite) {
  RunResults report = testing::SampleReport();
  const std::string unsharded = RenderJUnit(report);
  report.shard = {Shard{2, 3}, 6, 17, 17};
  const std::string xml = RenderJUnit(report);
  const std::string root = "<testsuites name=\"oomguard\"";
  std::string expected;
  std::istringstream lines(unsharded);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(root, 0) == 0) line.replace(0, root.size(), "<testsuites name=\"oomguard shard 2/3\"");
    expected += line + "\n";
    if (line.rfind("  <testsuite ", 0) == 0) {
      expected += "    <properties>\n      <property name=\"shard\" value=\"2/3\"/>\n    </properties>\n";
    }
  }
  EXPECT_EQ(xml, expected);
  EXPECT_NE(xml.find("\n<testsuites name=\"oomguard shard 2/3\" tests=\"8\" failures=\"2\" errors=\"1\" "
                     "time=\"4.200\">\n  <testsuite name=\"forgotten-no-grad\""),
            std::string::npos)
      << xml;
  EXPECT_EQ(JUnitProblems(xml), std::vector<std::string>{});
  if (HaveXmllint()) {
    EXPECT_EQ(Xmllint("--noout --schema '" + GoldenPath("junit-10.xsd") + "'", xml), 0);
  }
}

TEST(JUnit, CharactersXmlCannotCarryAreReplaced) {
  const std::string xml = RenderJUnit(testing::HostileReport());
  EXPECT_NE(xml.find("<testsuite name=\"ctl\xEF\xBF\xBD\xEF\xBF\xBD name\xEF\xBF\xBD\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("name=\"x|y`z*_&#10;&lt;b&gt;&amp;$\xc3\xa9 [cpu, NVIDIA T4 16GB]\""), std::string::npos);
  EXPECT_NE(xml.find("<failure message=\"line1&#10;line2&#9;tab&#13;|pipe\" type=\"FAIL\">line1\nline2\ttab&#13;|pipe\n"
                     "second\n"),
            std::string::npos);
  EXPECT_EQ(JUnitProblems(xml), std::vector<std::string>{});
  if (HaveXmllint()) {
    EXPECT_EQ(Xmllint("--noout", xml), 0);
  }
}

TEST(JUnit, GoldenFileIsWellFormedWithTheRequiredAttributes) {
  EXPECT_EQ(JUnitProblems(ReadFile(GoldenPath("sample.junit.xml"))), std::vector<std::string>{});
}

TEST(JUnit, XmllintAcceptsGoldenFileAgainstTheJUnitSchema) {
  if (!HaveXmllint()) GTEST_SKIP() << "xmllint not installed (Debian package libxml2-utils)";
  const std::string golden = "'" + GoldenPath("sample.junit.xml") + "'";
  EXPECT_EQ(std::system(("xmllint --noout " + golden).c_str()), 0);
  EXPECT_EQ(std::system(("xmllint --noout --schema '" + GoldenPath("junit-10.xsd") + "' " + golden).c_str()), 0);
}

}  // namespace
}  // namespace oomguard
