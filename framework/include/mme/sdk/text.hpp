// The text helpers every part of mme shares (the host libraries, plugins, tests), written once:
// lower case (ASCII), trimming white space, splitting a list at a separator. Joining is fmt's:
// fmt::format("{}", fmt::join(items, ", ")) (fmt/format.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mme {

// `s` with A to Z made a to z and every other byte (UTF-8 included) kept: what std::tolower does
// in the C locale, whatever locale the process runs under (a Python host sets LC_CTYPE from the
// environment, where std::tolower may change bytes above 127).
inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// `s` without the white space (space, \t, \n, \v, \f, \r) at its ends.
inline std::string trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const std::size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return std::string(s.substr(first, s.find_last_not_of(kSpace) - first + 1));
}

enum class EmptyItems : bool { kKeep, kSkip };

// The items of `text` between the separators, as std::getline reads them: "a,,b" gives "a", ""
// and "b"; a separator at the end adds no item; "" gives none. With EmptyItems::kSkip the empty
// items are dropped ("a::b:" gives "a" and "b": a search path, where an empty entry names nothing).
inline std::vector<std::string> split(std::string_view text, char sep, EmptyItems empty = EmptyItems::kKeep) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start || empty == EmptyItems::kKeep) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace mme
