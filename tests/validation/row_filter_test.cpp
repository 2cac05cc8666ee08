// The row filter of `validate --golden/--case` (RowFilter, on RE2): what it matches, and the
// patterns it refuses with one usage error (docs/cli.md, docs/reliability.md).
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/sdk/error.hpp>
#include <mme/validate/validation.hpp>

namespace mme {
namespace {

using ::testing::HasSubstr;

bool matches(const std::string& pattern, const std::string& field) {
  return RowFilter("--case", pattern).search(field);
}

std::string refusal(const std::string& pattern) {
  try {
    RowFilter("--golden", pattern);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(RowFilter, SearchesTheFieldUnlessAnchored) {
  EXPECT_TRUE(matches("tp2", "gpt3_tp2_pp2"));
  EXPECT_FALSE(matches("^tp2", "gpt3_tp2_pp2"));
  EXPECT_TRUE(matches("pp2$", "gpt3_tp2_pp2"));
  EXPECT_FALSE(matches("tp2$", "gpt3_tp2_pp2"));
  EXPECT_TRUE(matches("pp4|^gpt3", "gpt3_tp2_pp2"));
  EXPECT_TRUE(matches("^gpt3_tp\\d_pp[0-9]$", "gpt3_tp2_pp2"));
  EXPECT_TRUE(matches("(?:tp2_){1}pp", "gpt3_tp2_pp2"));
  EXPECT_TRUE(matches("", "anything"));
  // A word boundary, which the hand-written matcher refused: '_' is a word character.
  EXPECT_TRUE(matches("\\bh100\\b", "dgx h100 x8"));
  EXPECT_FALSE(matches("\\bh100\\b", "dgx_h100_x8"));
  // Bytes, not UTF-8: '.' matches each byte of "é" (0xC3 0xA9), a field that is not UTF-8 too.
  EXPECT_TRUE(matches("^a..b$",
                      "a\xC3\xA9"
                      "b"));
  EXPECT_TRUE(matches("\\xff", std::string("x\xff")));
}

TEST(RowFilter, NestedRepeatsOnALongFieldStayLinear) {
  // RE2 runs automata: these patterns take a backtracking engine exponential or deep recursion.
  const std::string field(100000, 'a');
  EXPECT_FALSE(matches("(\\w+)+!", field));
  EXPECT_TRUE(matches("(.)*$", field));
  EXPECT_TRUE(matches("(a|aa)*$", field));
}

TEST(RowFilter, WhatNoLinearMatcherCanDoIsRefused) {
  EXPECT_THAT(refusal("(tp2)\\1"),
              HasSubstr("--golden: invalid regular expression: back-references are not supported"));
  EXPECT_THAT(refusal("a\\44444444444444444444"), HasSubstr("back-references are not supported"));
  EXPECT_THAT(refusal("tp(?=2)"), HasSubstr("--golden: invalid regular expression: invalid perl operator"));
  EXPECT_THAT(refusal("tp(?<!2)"), HasSubstr("--golden: invalid regular expression"));
  EXPECT_THAT(refusal("(tp2"), HasSubstr("--golden: invalid regular expression: missing )"));
}

TEST(RowFilter, SizesAreBounded) {
  EXPECT_THAT(refusal(std::string(257, 'a')), HasSubstr("longer than 256 characters"));
  EXPECT_EQ(refusal(std::string(256, 'a')), "(accepted)");
  EXPECT_THAT(refusal("a{1001}"), HasSubstr("--golden: a repeat count of {1001}"));
  EXPECT_THAT(refusal("a{99999999}"), HasSubstr("a repeat count of {99999999}"));
  EXPECT_THAT(refusal("(a{1000}){1000}"), HasSubstr("a repeat count of"));  // nested: 10^6 copies
  EXPECT_EQ(refusal("a{1000}"), "(accepted)");
  // 21 copies of a{1000} (about 21 000 states) fit the budget, 22 do not (row_filter.cpp).
  std::string fits, too_large;
  for (int i = 0; i < 21; ++i) fits += "a{1000}";
  too_large = fits + "a{1000}";
  EXPECT_EQ(refusal(fits), "(accepted)");
  EXPECT_THAT(refusal(too_large), HasSubstr("too large once its repeats are expanded"));
}

TEST(RowFilter, MessagesQuoteThePatternPrintably) {
  // RE2's message quotes the pattern; an escape character of it reaches no terminal.
  const std::string e = refusal("(\x1b[31m");
  EXPECT_THAT(e, HasSubstr("invalid regular expression"));
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
}

}  // namespace
}  // namespace mme
