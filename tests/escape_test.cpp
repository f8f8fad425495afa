// One escaper per markup (reports/escape.h), each with the characters its language gives meaning to.
#include "reports/escape.h"

#include <gtest/gtest.h>

namespace oomguard {
namespace {

TEST(Escape, HtmlEscapesTheFiveMarkupCharacters) {
  EXPECT_EQ(HtmlEscape("bad&name<\"x\"> 'q'"), "bad&amp;name&lt;&quot;x&quot;&gt; &#39;q&#39;");
  EXPECT_EQ(HtmlEscape("plain text, 12.00 MiB"), "plain text, 12.00 MiB");
}

TEST(Escape, XmlKeepsLineBreaksInTextAndEncodesThemInAttributes) {
  EXPECT_EQ(XmlEscape("a&b<c>\"d\"'e'\tf\ng\rh"), "a&amp;b&lt;c&gt;&quot;d&quot;&apos;e&apos;\tf\ng&#13;h");
  EXPECT_EQ(XmlEscape("a\tb\nc", /*attribute=*/true), "a&#9;b&#10;c");
}

TEST(Escape, XmlReplacesMalformedUtf8AndCharactersXmlCannotCarry) {
  EXPECT_EQ(XmlEscape("ok\xff\xfe"
                      "end"),
            "ok\xEF\xBF\xBD\xEF\xBF\xBD"
            "end");
  EXPECT_EQ(XmlEscape(std::string("a\x01"
                                  "b",
                                  3)),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(XmlEscape("\xC3\xA9t\xC3\xA9"), "\xC3\xA9t\xC3\xA9");  // "été" stays
}

TEST(Escape, MarkdownEscapesTableAndEmphasisCharactersAndBlanksControls) {
  EXPECT_EQ(MarkdownText("a|b *c* _d_ `e` [f] ~g~ $h$ \\ <i>&"),
            "a\\|b \\*c\\* \\_d\\_ \\`e\\` \\[f\\] \\~g\\~ \\$h\\$ \\\\ &lt;i&gt;&amp;");
  EXPECT_EQ(MarkdownText("line\nbreak\x7F"), "line break ");
}

}  // namespace
}  // namespace oomguard
