// The --golden / --case filters of `mme validate` (validation.hpp, RowFilter), on RE2: an
// automaton, never a backtracking search, so a match costs time linear in the field whatever the
// pattern (`(\w+)+!` or `(.)*$` against a long field included), and nothing recurses on the text.
#include <fmt/core.h>

#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/validate/validation.hpp"

#include <re2/re2.h>

namespace mme {

namespace {

constexpr std::size_t kMaxFilterLength = 256;
// RE2's memory budget for the pattern: two thirds of it hold the compiled program (8 bytes an
// instruction), so 256 KiB allow about 21 000 instructions once repeats are expanded (22 copies
// of `a{1000}` are refused), the bound the hand-written matcher had (20 000 states). RE2 itself
// refuses repeat counts over 1000, nested ones included (`(a{1000}){1000}`).
constexpr std::int64_t kMaxFilterMemory = std::int64_t{256} << 10;

// A back-reference (\1 .. \9), inside a class or not: RE2 cannot match one (no linear-time
// algorithm can), and its own error ("invalid escape sequence") would not say why.
bool has_back_reference(std::string_view p) {
  for (std::size_t i = 0; i + 1 < p.size(); ++i) {
    if (p[i] != '\\') continue;
    if (p[i + 1] >= '1' && p[i + 1] <= '9') return true;
    ++i;  // an escaped character, even a backslash
  }
  return false;
}

}  // namespace

RowFilter::RowFilter(std::string_view flag, std::string_view pattern) {
  if (pattern.size() > kMaxFilterLength)
    throw UsageError(fmt::format("{}: the regular expression is longer than {} characters", flag, kMaxFilterLength));
  if (has_back_reference(pattern))
    throw UsageError(fmt::format(
        "{}: invalid regular expression: back-references are not supported (the matcher runs in linear time)", flag));
  RE2::Options options;
  options.set_log_errors(false);
  options.set_encoding(RE2::Options::EncodingLatin1);  // bytes, as the fields are read
  options.set_max_mem(kMaxFilterMemory);
  auto re = std::make_shared<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  switch (re->error_code()) {
    case RE2::NoError: break;
    case RE2::ErrorRepeatSize:
      throw UsageError(fmt::format(
          "{}: a repeat count of {} in the regular expression is out of range (at most 1000, nested repeats too)", flag,
          printable(re->error_arg())));
    case RE2::ErrorPatternTooLarge:
      throw UsageError(fmt::format(
          "{}: the regular expression is too large once its repeats are expanded (about 20 000 states at most); "
          "use smaller repeat counts",
          flag));
    default:
      // RE2's message quotes the pattern's offending part: printable() keeps its bytes harmless.
      throw UsageError(fmt::format("{}: invalid regular expression: {}", flag, printable(re->error())));
  }
  re_ = std::move(re);
}

bool RowFilter::search(std::string_view text) const {
  return RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *re_);
}

}  // namespace mme
