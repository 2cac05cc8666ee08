// Unit conversions for printing. Quantities stay in bytes and elements everywhere else.
#pragma once

#include <cstdint>
#include <string>

namespace mme {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;

inline double to_gib(std::int64_t bytes) { return static_cast<double>(bytes) / kGiB; }
inline std::int64_t gib_to_bytes(double gib) { return static_cast<std::int64_t>(gib * kGiB + 0.5); }
inline std::int64_t mib_to_bytes(std::int64_t mib) { return mib * 1024 * 1024; }

// "12.34 GiB", "512.0 MiB", "1.2 KiB", "17 B".
std::string format_bytes(std::int64_t bytes);
// "671.03B", "37.55B", "494.03M".
std::string format_count(std::int64_t count);

}  // namespace mme
