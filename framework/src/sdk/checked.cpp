#include "mme/sdk/checked.hpp"

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

namespace mme {

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    throw ConfigError(fmt::format("{}: {} x {} does not fit in 64 bits; no real model is that large", what, a, b));
  return r;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    throw ConfigError(fmt::format("{}: {} + {} does not fit in 64 bits; no real model is that large", what, a, b));
  return r;
}

void throw_overflow(char op, std::int64_t a, std::int64_t b) {
  if (op == '/')
    throw ConfigError(fmt::format("size arithmetic: {} / {} is undefined; a size that must be positive is not", a, b));
  throw ConfigError(
      fmt::format("size arithmetic: {} {} {} does not fit in 64 bits; no real model and layout is "
                  "that large (check the model's dimensions, --seq-length and --micro-batch-size)",
                  a, op == '*' ? 'x' : op, b));
}

}  // namespace mme
