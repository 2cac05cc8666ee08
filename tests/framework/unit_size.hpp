// The size of code units (issue 15: no function in framework/, plugins/ or cli/ over 200 lines,
// no source file over 900). A brace scanner, not a parser: it skips comments, string and
// character literals (raw strings included), treats namespace, class, struct, union, enum and
// extern "C" bodies as transparent, and takes any other brace block at that level whose head
// holds a ')' as a function body (free functions, member definitions, inline members). Lambdas
// and local classes count towards the function around them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace mme::test {

struct FunctionSpan {
  std::string head;                           // the text before its '{', whitespace collapsed
  std::size_t first_line = 0, last_line = 0;  // 1-based, inclusive
  std::size_t lines() const { return last_line - first_line + 1; }
};

std::vector<FunctionSpan> function_spans(const std::string& source);

}  // namespace mme::test
