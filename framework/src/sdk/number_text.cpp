#include "mme/sdk/number_text.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <system_error>

namespace mme {

namespace {

bool digit(char c) { return c >= '0' && c <= '9'; }

// Whether a decimal text that std::from_chars found out of range is too large (else too
// small): the position of its first significant digit against the point, plus its exponent.
bool overflows(std::string_view t) {
  std::size_t i = 0;
  long long magnitude = 0;  // the power of ten of the first significant digit
  bool seen_point = false, seen_digit = false;
  long long int_digits = 0, leading_fraction_zeros = 0;
  for (; i < t.size() && (digit(t[i]) || t[i] == '.'); ++i) {
    if (t[i] == '.') {
      seen_point = true;
    } else if (!seen_point) {
      if (seen_digit || t[i] != '0') {
        seen_digit = true;
        ++int_digits;
      }
    } else if (!seen_digit) {
      if (t[i] == '0')
        ++leading_fraction_zeros;
      else
        seen_digit = true;
    }
  }
  magnitude = int_digits > 0 ? int_digits - 1 : -leading_fraction_zeros - 1;
  long long exponent = 0;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    const bool negative = i < t.size() && t[i] == '-';
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    for (; i < t.size() && digit(t[i]); ++i)
      if (exponent < 1000000) exponent = exponent * 10 + (t[i] - '0');  // saturates: any more is out of range
    if (negative) exponent = -exponent;
  }
  return magnitude + exponent > 0;
}

}  // namespace

std::optional<double> parse_decimal(std::string_view text) {
  std::string_view t = text;
  bool negative = false;
  if (!t.empty() && (t.front() == '+' || t.front() == '-')) {
    negative = t.front() == '-';
    t.remove_prefix(1);
  }
  // After the sign: a digit, a point or a letter of inf / nan (from_chars would take a second sign).
  if (t.empty() || t.front() == '+' || t.front() == '-') return std::nullopt;
  double v = 0;
#if defined(__EMSCRIPTEN__)
  // The page's libc++ has no floating-point std::from_chars. strtod reads the same grammar once
  // the texts it takes and from_chars does not are refused first: leading blanks, hexadecimal
  // ("0x1p3"); the page never calls setlocale, so its decimal point is always '.'.
  const char first = t.front();
  if (!(digit(first) || first == '.' || first == 'i' || first == 'I' || first == 'n' || first == 'N'))
    return std::nullopt;
  if (t.find_first_of("xX") != std::string_view::npos) return std::nullopt;
  const std::string copy(t);
  char* end = nullptr;
  errno = 0;
  v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size()) return std::nullopt;
  if (errno == ERANGE && (std::isinf(v) || v == 0.0)) v = overflows(t) ? std::numeric_limits<double>::infinity() : 0.0;
#else
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v, std::chars_format::general);
  if (end != t.data() + t.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range)
    v = overflows(t) ? std::numeric_limits<double>::infinity() : 0.0;
  else if (ec != std::errc())
    return std::nullopt;
#endif
  return negative ? -v : v;
}

std::optional<std::int64_t> parse_integer(std::string_view text, bool* out_of_range) {
  if (out_of_range) *out_of_range = false;
  std::string_view t = text;
  if (!t.empty() && t.front() == '+') {
    t.remove_prefix(1);
    if (t.empty() || !digit(t.front())) return std::nullopt;
  }
  if (t.empty() || !(digit(t.front()) || (t.front() == '-' && t.size() > 1 && digit(t[1])))) return std::nullopt;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc::result_out_of_range) {
    // The whole text must still be digits for it to be an integer that is too large.
    std::size_t i = t.front() == '-' ? 1 : 0;
    while (i < t.size() && digit(t[i])) ++i;
    if (i == t.size() && out_of_range) *out_of_range = true;
    return std::nullopt;
  }
  if (ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return v;
}

}  // namespace mme
