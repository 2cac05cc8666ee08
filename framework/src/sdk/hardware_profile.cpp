#include "mme/sdk/hardware_profile.hpp"

#include <cctype>
#include <cmath>

#include <fmt/core.h>

namespace mme {

std::string normalize_hardware_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (unsigned char c : name) {
    if (c == '-' || c == '_' || c == ' ') continue;
    out.push_back(static_cast<char>(std::tolower(c)));
  }
  return out;
}

std::string throughput_problem(const ThroughputFigure& figure, double value, bool given) {
  if (value == 0 && (!given || figure.zero_allowed)) return {};
  if (!std::isfinite(value) || value < 0)
    return fmt::format("'{}' {} is not a number of {}", figure.key, value, figure.unit);
  if (value < kMinThroughput)
    return fmt::format("'{}' {} is less than {} {}, below any device{}", figure.key, value, kMinThroughput, figure.unit,
                       figure.zero_allowed ? " (0: not supported)" : "; leave it out when it is unknown");
  if (value > kMaxThroughput)
    return fmt::format("'{}' {} is more than {:g} {}, beyond any device", figure.key, value, kMaxThroughput,
                       figure.unit);
  return {};
}

}  // namespace mme
