// Numbers as text, the same under every locale. A host that embeds mme may set a
// comma-decimal locale (Python's locale.setlocale, a C program's setlocale, C++'s
// std::locale::global): strtod, std::stod, printf's %f, std::to_string(double) and iostreams
// then read "0.25" as 0 and write "0,25". Every number mme reads from text goes through these
// two (std::from_chars underneath); numbers are written with fmt ("{}", "{:.2f}", never the
// 'L' flag) or nlohmann's dump(), which ignore the locale (docs/reliability.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mme {

// The whole of `text` as a decimal number: an optional sign, digits with an optional '.'
// and an optional exponent ("0.25", "-1e-3", "+.5", "5."), also "inf" and "nan" (the caller
// decides whether those are numbers it takes). A value beyond double's range is +-infinity,
// one below its smallest denormal +-0, as strtod has them. nullopt for anything else: an
// empty text, spaces, a ',' decimal separator, a hexadecimal number, trailing characters.
std::optional<double> parse_decimal(std::string_view text);

// The whole of `text` as a base-10 integer with an optional sign. nullopt when it is not one;
// `out_of_range` (when given) tells an integer beyond 64 bits from text that is no integer.
std::optional<std::int64_t> parse_integer(std::string_view text, bool* out_of_range = nullptr);

}  // namespace mme
