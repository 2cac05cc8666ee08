// Checked 64-bit arithmetic for products of config values: an overflow is a ConfigError
// naming what was being computed, never a wrapped number.
#pragma once

#include <cstdint>
#include <string_view>

namespace mme {

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what);
std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what);

}  // namespace mme
