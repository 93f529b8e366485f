// guide/grammar and guide/matcher: GBNF parsing and its errors, and what the pushdown matcher
// accepts and rejects (UTF-8 byte by byte, token terminals, nesting, snapshots).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "error_of.h"
#include "guide/grammar.h"
#include "guide/matcher.h"

namespace {

using sluice::guide::Matcher;
using sluice::guide::parse_gbnf;
using sluice::testing::expect_error_of;

std::shared_ptr<const sluice::guide::Grammar> gbnf(std::string_view text) {
  return std::make_shared<const sluice::guide::Grammar>(parse_gbnf(text));
}

// Whether the whole of `s` is a sentence of the grammar.
bool full(const std::shared_ptr<const sluice::guide::Grammar>& g, std::string_view s) {
  Matcher m(g);
  return m.accept_bytes(s) && m.can_end();
}

// Whether `s` is a prefix of some sentence.
bool prefix(const std::shared_ptr<const sluice::guide::Grammar>& g, std::string_view s) {
  Matcher m(g);
  return m.accept_bytes(s);
}

TEST(GuideGrammar, LiteralsAlternativesAndSequences) {
  auto g = gbnf("root ::= \"ab\" | \"c\" tail\ntail ::= \"d\" \"e\"\n");
  EXPECT_TRUE(full(g, "ab"));
  EXPECT_TRUE(full(g, "cde"));
  EXPECT_FALSE(full(g, "cd"));
  EXPECT_TRUE(prefix(g, "cd"));
  EXPECT_FALSE(prefix(g, "ac"));
  EXPECT_FALSE(full(g, "abx"));
  EXPECT_FALSE(full(g, ""));
}

TEST(GuideGrammar, EscapesInLiteralsAreUtf8Bytes) {
  auto g = gbnf(R"(root ::= "a\n\t\r\\\"\x41\u00e9\U0001F600")");
  EXPECT_TRUE(full(g, "a\n\t\r\\\"A\xC3\xA9\xF0\x9F\x98\x80"));
  // Raw UTF-8 in the source is the same literal.
  auto raw = gbnf("root ::= \"é😀\"");
  EXPECT_TRUE(full(raw, "\xC3\xA9\xF0\x9F\x98\x80"));
}

TEST(GuideGrammar, ClassesAreOverCodePoints) {
  auto g = gbnf(R"(root ::= [a-cé-ë] [^"\\]*)");
  EXPECT_TRUE(full(g, "a"));
  EXPECT_TRUE(full(g, "\xC3\xAA"));  // ê
  EXPECT_FALSE(full(g, "\xC3\xAC"));  // ì is past ë
  EXPECT_FALSE(full(g, "d"));
  // The negated class takes any valid code point but " and \, in any UTF-8 length.
  EXPECT_TRUE(full(g, "bxyz \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\x7F"));
  EXPECT_FALSE(prefix(g, "b\""));
  EXPECT_FALSE(prefix(g, "b\\"));
  // Invalid UTF-8 is rejected even by a negated class: a lone continuation, an overlong
  // encoding, a surrogate, a code point above U+10FFFF.
  EXPECT_FALSE(prefix(g, "b\x80"));
  EXPECT_FALSE(prefix(g, "b\xC0\xAF"));
  EXPECT_FALSE(prefix(g, "b\xED\xA0\x80"));
  EXPECT_FALSE(prefix(g, "b\xF4\x90\x80\x80"));
  EXPECT_FALSE(prefix(g, "b\xF5"));
  // A code point split across calls (as across two BPE tokens) is continued.
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("b\xF0\x9F"));
  EXPECT_FALSE(m.can_end());  // mid code point
  ASSERT_TRUE(m.accept_bytes("\x98"));
  ASSERT_TRUE(m.accept_byte(0x80));
  EXPECT_TRUE(m.can_end());
}

TEST(GuideGrammar, DotIsAnyCodePoint) {
  auto g = gbnf("root ::= \"<\" . \">\"");
  EXPECT_TRUE(full(g, "<x>"));
  EXPECT_TRUE(full(g, "<\n>"));
  EXPECT_TRUE(full(g, "<\xE2\x82\xAC>"));
  EXPECT_FALSE(full(g, "<xy>"));
  EXPECT_FALSE(full(g, "<>"));
}

TEST(GuideGrammar, Repetitions) {
  auto g = gbnf(R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,} "f"{0,2} ("g" "h"){1,2} x
x ::= "x"{2,3})");
  EXPECT_TRUE(full(g, "bddeghxx"));
  EXPECT_TRUE(full(g, "aaabbbcddeeeffghghxxx"));
  EXPECT_FALSE(full(g, "ddeghxx"));      // b+ needs one b
  EXPECT_FALSE(full(g, "bdeghxx"));      // d{2}
  EXPECT_FALSE(full(g, "bddeffffghxx"));  // f{0,2}
  EXPECT_FALSE(full(g, "bddeghghghxx"));  // (gh){1,2}
  EXPECT_FALSE(full(g, "bddeghxxxx"));   // x{2,3}
  EXPECT_FALSE(full(g, "bddegxx"));
  EXPECT_FALSE(full(g, "bddeghx"));
}

TEST(GuideGrammar, LongRepetitionKeepsStacksShallow) {
  auto g = gbnf("root ::= \"[\" [a-z]* \"]\"");
  Matcher m(g);
  ASSERT_TRUE(m.accept_byte('['));
  const size_t words = m.snapshot().words.size();
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(m.accept_byte('a' + i % 26));
  EXPECT_EQ(m.snapshot().words.size(), words);
  ASSERT_TRUE(m.accept_byte(']'));
  EXPECT_TRUE(m.finished());
}

TEST(GuideGrammar, CommentsNewlinesAndContinuationLines) {
  auto g = gbnf(R"(# a comment line
root ::= (
    "a"   # inside a group
  | "b"
  ) rest
rest ::=
  "x"
  | "y"  # continues the rule on the next line
other-rule_2 ::= "z"
)");
  EXPECT_TRUE(full(g, "ax"));
  EXPECT_TRUE(full(g, "by"));
  EXPECT_FALSE(full(g, "az"));
}

TEST(GuideGrammar, NestedRecursionIsPushdown) {
  auto g = gbnf(R"(root ::= value
value ::= "[" ( value ( "," value )* )? "]" | [0-9])");
  EXPECT_TRUE(full(g, "[]"));
  EXPECT_TRUE(full(g, "[1,[2,[3,[]]],4]"));
  std::string deep(200, '[');
  deep += std::string(200, ']');
  EXPECT_TRUE(full(g, deep));
  EXPECT_FALSE(full(g, "[[1]"));
  EXPECT_FALSE(full(g, "[1]]"));
  EXPECT_FALSE(full(g, "[1,]"));
}

TEST(GuideGrammar, TokenTerminalsMatchIdsNeverBytes) {
  auto g = gbnf(R"(root ::= <[7]> "{" [a-z]+ "}" <[8]>)");
  Matcher m(g);
  EXPECT_FALSE(m.accept_bytes("<[7]>"));
  EXPECT_FALSE(m.accept_token_terminal(8));
  ASSERT_TRUE(m.accept_token_terminal(7));
  ASSERT_TRUE(m.accept_bytes("{ab}"));
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept_token_terminal(8));
  EXPECT_TRUE(m.finished());
}

TEST(GuideGrammar, RejectionLeavesStateUnchanged) {
  auto g = gbnf(R"(root ::= "abc" | "abd")");
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("a"));
  const auto before = m.snapshot();
  EXPECT_FALSE(m.accept_bytes("bx"));  // "b" alone would pass: all or nothing
  EXPECT_EQ(m.snapshot(), before);
  EXPECT_FALSE(m.accept_byte('z'));
  EXPECT_FALSE(m.accept_token_terminal(3));
  EXPECT_EQ(m.snapshot(), before);
  ASSERT_TRUE(m.accept_bytes("bd"));
  EXPECT_TRUE(m.finished());
}

TEST(GuideGrammar, SnapshotAndCopyRollBack) {
  auto g = gbnf(R"(root ::= "x" [0-9]* "y")");
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("x12"));
  const auto saved = m.snapshot();
  Matcher draft = m;
  ASSERT_TRUE(draft.accept_bytes("34y"));
  EXPECT_TRUE(draft.finished());
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept_bytes("5"));
  m.restore(saved);
  EXPECT_EQ(m.snapshot(), saved);
  EXPECT_TRUE(m.accept_bytes("y"));
  EXPECT_TRUE(m.finished());
}

TEST(GuideGrammar, CanEndVersusFinished) {
  auto g = gbnf(R"(root ::= "a" "b"?)");
  Matcher m(g);
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept_byte('a'));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.finished());
  ASSERT_TRUE(m.accept_byte('b'));
  EXPECT_TRUE(m.finished());
  EXPECT_TRUE(Matcher(gbnf("root ::= \"\"")).finished());
}

TEST(GuideGrammar, AmbiguousGrammarStacksAreMergedAndBounded) {
  // Two ways to read every "a": merged, so the count stays flat.
  auto g = gbnf(R"(root ::= ( "a" | [a] )*)");
  Matcher m(g);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(m.accept_byte('a'));
  EXPECT_LE(m.stacks(), 2u);
  // Every "a" doubles the distinct stacks (a "b" or a "c" owed for it).
  auto bad = gbnf(R"(root ::= x
x ::= "a" x "b" | "a" x "c" | "")");
  Matcher b(bad);
  const std::string msg = expect_error_of([&] {
    for (int i = 0; i < 100; ++i) b.accept_byte('a');
  });
  EXPECT_NE(msg.find("4096 parse stacks"), std::string::npos) << msg;
}

TEST(GuideGrammar, ParseErrorsSayWhereAndWhat) {
  auto err = [](std::string_view text) { return expect_error_of([&] { parse_gbnf(text); }); };
  EXPECT_EQ(err("root ::= foo\n"), "gbnf 1:10: undefined rule 'foo'");
  EXPECT_EQ(err("item ::= \"a\"\n"), "gbnf 2:1: missing rule 'root'");
  EXPECT_EQ(err("root ::= \"abc\n"), "gbnf 1:10: unterminated literal");
  EXPECT_EQ(err("root ::= [abc\n"), "gbnf 1:10: unterminated character class");
  EXPECT_EQ(err("root ::= \"a\" (\"b\" \n"), "gbnf 1:14: unclosed '('");
  EXPECT_EQ(err("root ::= \"\\q\"\n"), "gbnf 1:11: unknown escape '\\q'");
  EXPECT_EQ(err("root ::= \"a\"\nroot ::= \"b\"\n"), "gbnf 2:1: rule 'root' is defined twice");
  EXPECT_EQ(err("root ::= * \"a\"\n"), "gbnf 1:10: '*' has nothing to repeat");
  EXPECT_EQ(err("root ::= \"a\"{3,2}\n"), "gbnf 1:13: repetition {3,2} has max below min");
  EXPECT_EQ(err("root = \"a\"\n"), "gbnf 1:6: expected '::=' after rule name 'root'");
  EXPECT_EQ(err("root ::= \"a\" )\n"), "gbnf 1:14: unexpected ')' in rule 'root'");
  EXPECT_EQ(err("root ::= <[x]>\n"), "gbnf 1:10: token terminal needs a token id: <[ID]>");
  EXPECT_EQ(err("root ::= [z-a]\n"), "gbnf 1:10: character class range is reversed");
}

TEST(GuideGrammar, LeftRecursionIsRefusedNamingTheRule) {
  auto err = [](std::string_view text) { return expect_error_of([&] { parse_gbnf(text); }); };
  EXPECT_EQ(err("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]\n"),
            "gbnf 2:1: rule 'expr' is left-recursive");
  // Indirectly, behind a nullable rule.
  EXPECT_EQ(err("root ::= a\na ::= opt b \"x\"\nb ::= a | \"y\"\nopt ::= \"o\"?\n"),
            "gbnf 2:1: rule 'a' is left-recursive");
  // A repetition of something that can be empty would expand forever.
  const std::string rep = err("root ::= (\"a\"?)*\n");
  EXPECT_NE(rep.find("rule 'root' is left-recursive"), std::string::npos) << rep;
  // Right recursion is fine.
  EXPECT_NO_THROW(parse_gbnf("root ::= \"a\" root | \"b\"\n"));
}

}  // namespace
