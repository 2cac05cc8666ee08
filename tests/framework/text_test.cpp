// mme/sdk/text.hpp: the text helpers shared by the host, the plugins and the tests.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <mme/sdk/text.hpp>

namespace mme {
namespace {

using Items = std::vector<std::string>;

TEST(Text, LowerChangesOnlyAsciiLetters) {
  EXPECT_EQ(lower("NVIDIA H100-SXM_80GB"), "nvidia h100-sxm_80gb");
  // Bytes above 127 (UTF-8 'É', Latin-1 0xC9) are kept whatever the locale.
  EXPECT_EQ(lower("\xC3\x89T\xC9"), "\xC3\x89t\xC9");
  EXPECT_EQ(lower(""), "");
}

TEST(Text, TrimRemovesWhiteSpaceAtTheEnds) {
  EXPECT_EQ(trim(" \t a b \r\n"), "a b");
  EXPECT_EQ(trim(" \t\n"), "");
  EXPECT_EQ(trim("x"), "x");
}

TEST(Text, SplitReadsLikeGetline) {
  EXPECT_EQ(split("core_attn,mlp", ','), (Items{"core_attn", "mlp"}));
  EXPECT_EQ(split("a,,b", ','), (Items{"a", "", "b"}));
  EXPECT_EQ(split(",a", ','), (Items{"", "a"}));
  EXPECT_EQ(split("a,", ','), (Items{"a"}));  // no item after a trailing separator
  EXPECT_EQ(split(",", ','), (Items{""}));
  EXPECT_EQ(split("", ','), Items{});
}

TEST(Text, SplitCanSkipEmptyItems) {
  // A search path: an empty entry names no folder (never the current one).
  EXPECT_EQ(split("a::b:", ':', EmptyItems::kSkip), (Items{"a", "b"}));
  EXPECT_EQ(split(":::", ':', EmptyItems::kSkip), Items{});
}

}  // namespace
}  // namespace mme
