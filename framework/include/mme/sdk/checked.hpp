// Checked 64-bit arithmetic for products of config values: an overflow is a ConfigError
// naming what was being computed, never a wrapped number.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

namespace mme {

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what);
std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what);

// Throws the ConfigError of an overflowing `a op b` (op is '+', '-', '*' or '/').
[[noreturn]] void throw_overflow(char op, std::int64_t a, std::int64_t b);

// A 64-bit integer whose +, -, * and / throw ConfigError instead of wrapping (or dividing by
// zero). Layer-memory models and the engine compute element and byte counts with it, so a
// product of config values too large for 64 bits is an error that names the operands, never
// undefined behaviour: declare the operands CheckedInt and every expression built from them is
// checked. Converts from integers implicitly, never from floating point; value() gives the
// plain number back.
class CheckedInt {
 public:
  constexpr CheckedInt() noexcept = default;
  constexpr CheckedInt(std::int64_t v) noexcept : v_(v) {}  // NOLINT: implicit on purpose
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  CheckedInt(T) = delete;  // a double would be truncated silently

  constexpr std::int64_t value() const noexcept { return v_; }

  friend CheckedInt operator+(CheckedInt a, CheckedInt b) {
    std::int64_t r = 0;
    if (__builtin_add_overflow(a.v_, b.v_, &r)) throw_overflow('+', a.v_, b.v_);
    return r;
  }
  friend CheckedInt operator-(CheckedInt a, CheckedInt b) {
    std::int64_t r = 0;
    if (__builtin_sub_overflow(a.v_, b.v_, &r)) throw_overflow('-', a.v_, b.v_);
    return r;
  }
  friend CheckedInt operator*(CheckedInt a, CheckedInt b) {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(a.v_, b.v_, &r)) throw_overflow('*', a.v_, b.v_);
    return r;
  }
  friend CheckedInt operator/(CheckedInt a, CheckedInt b) {
    if (b.v_ == 0 || (b.v_ == -1 && a.v_ == std::numeric_limits<std::int64_t>::min())) throw_overflow('/', a.v_, b.v_);
    return a.v_ / b.v_;
  }
  CheckedInt& operator+=(CheckedInt b) { return *this = *this + b; }
  CheckedInt& operator-=(CheckedInt b) { return *this = *this - b; }
  CheckedInt& operator*=(CheckedInt b) { return *this = *this * b; }

  friend constexpr bool operator==(const CheckedInt&, const CheckedInt&) noexcept = default;
  friend constexpr std::strong_ordering operator<=>(const CheckedInt&, const CheckedInt&) noexcept = default;

 private:
  std::int64_t v_ = 0;
};

}  // namespace mme
