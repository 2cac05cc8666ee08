#include "mme/sdk/units.hpp"

#include <cmath>
#include <cstdlib>

#include <fmt/core.h>

namespace mme {

std::string format_bytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const double a = std::fabs(b);
  if (a >= kGiB) return fmt::format("{:.2f} GiB", b / kGiB);
  if (a >= kMiB) return fmt::format("{:.1f} MiB", b / kMiB);
  if (a >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string format_count(std::int64_t count) {
  const double c = static_cast<double>(count);
  const double a = std::fabs(c);
  if (a >= 1e12) return fmt::format("{:.2f}T", c / 1e12);
  if (a >= 1e9) return fmt::format("{:.2f}B", c / 1e9);
  if (a >= 1e6) return fmt::format("{:.2f}M", c / 1e6);
  if (a >= 1e3) return fmt::format("{:.2f}K", c / 1e3);
  return fmt::format("{}", count);
}

}  // namespace mme
