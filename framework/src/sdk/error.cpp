#include "mme/sdk/error.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/core.h>

namespace mme {

std::string bounded_message(std::string_view message) {
  std::string out;
  out.reserve(std::min(message.size(), kMaxErrorMessageBytes));
  for (const char c : message) {
    if (c == '\0')
      out += "\\0";
    else
      out += c;
  }
  if (out.size() <= kMaxErrorMessageBytes) return out;
  // Cut points moved off UTF-8 continuation bytes, so no character is split.
  auto continuation = [&](std::size_t i) { return (static_cast<unsigned char>(out[i]) & 0xc0) == 0x80; };
  std::size_t head = kMaxErrorMessageBytes / 2, tail = out.size() - kMaxErrorMessageBytes / 4;
  while (head > 0 && continuation(head)) --head;
  while (tail < out.size() && continuation(tail)) ++tail;
  return fmt::format("{} [... {} bytes left out ...] {}", out.substr(0, head), tail - head, out.substr(tail));
}

Error::~Error() = default;
UsageError::~UsageError() = default;
ConfigError::~ConfigError() = default;
LayoutError::~LayoutError() = default;
PluginError::~PluginError() = default;
NotFoundError::~NotFoundError() = default;
InterruptedError::~InterruptedError() = default;

void rethrow_as_sdk_error(const Error& e) {
  const std::string message = e.what();
  switch (e.code()) {
    case ExitCode::kUsage: throw UsageError(message);
    case ExitCode::kBadModel: throw ConfigError(message);
    case ExitCode::kBadLayout: throw LayoutError(message);
    case ExitCode::kPlugin: throw PluginError(message);
    case ExitCode::kNotFound: throw NotFoundError(message);
    case ExitCode::kInterrupted: throw InterruptedError(message);
    default: throw Error(e.code(), message);
  }
}

void rethrow_as_sdk_error(const std::exception& e, const char* what) {
  throw PluginError(std::string(what) + ": " + e.what());
}

void rethrow_unknown(const char* what) { throw PluginError(std::string(what) + ": a non-standard exception"); }

std::string divisors_text(std::int64_t n, std::size_t max_items) {
  if (n <= 0) return "none";
  if (n > (std::int64_t{1} << 40)) return fmt::format("the divisors of {}", n);  // no real size; keeps this fast
  std::vector<std::int64_t> small, large;  // divisors up to sqrt(n), and their partners
  for (std::int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  if (max_items == 0) max_items = 1;
  const bool cut = small.size() > max_items;
  if (cut) small.erase(small.begin() + 1, small.end() - static_cast<std::ptrdiff_t>(max_items - 1));
  std::string out;
  for (std::size_t i = 0; i < small.size(); ++i) {
    if (i > 0) out += (i + 1 == small.size() && !cut) ? " or " : ", ";
    if (cut && i == 1) out += "..., ";
    out += std::to_string(small[i]);
  }
  return out;
}

}  // namespace mme
