#include "mme/sdk/config_reader.hpp"

#include <cmath>
#include <limits>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"
#include "mme/sdk/json_text.hpp"

namespace mme {

namespace {

std::string describe(const nlohmann::json& v) {
  std::string text = json_text(v);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

}  // namespace

std::string too_many_layers(std::string_view count) {
  return fmt::format(
      "{} layers is more than mme accepts (at most {}; the deepest real models have about 130, and "
      "the planner's cost grows with the square of the layer count)",
      count, ConfigReader::kMaxLayers);
}

ConfigReader::ConfigReader(const nlohmann::json& config, std::string source)
    : config_(config), source_(std::move(source)) {
  if (!config_.is_object())
    throw ConfigError(fmt::format("{}: expected a JSON object at the top level, got {}", source_, config_.type_name()));
}

void ConfigReader::fail(std::string_view key, const std::string& what) const {
  throw ConfigError(fmt::format("{}: {}: {}", source_, key, what));
}

bool ConfigReader::has(std::string_view key) const {
  auto it = config_.find(key);
  return it != config_.end() && !it->is_null();
}

const nlohmann::json* ConfigReader::get(std::string_view key) {
  auto it = config_.find(key);
  if (it == config_.end()) return nullptr;
  keys_read_.emplace_back(key);
  if (it->is_null()) return nullptr;
  return &*it;
}

std::int64_t ConfigReader::to_integer(std::string_view key, const nlohmann::json& v, std::int64_t min,
                                      std::int64_t max) {
  const char* expected = min > 0 ? "a positive integer" : "a non-negative integer";
  std::int64_t value = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned()) {
      auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(max))
        fail(key, fmt::format("{} is larger than {}, which no real model has", u, max));
      value = static_cast<std::int64_t>(u);
    } else {
      value = v.get<std::int64_t>();
    }
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) fail(key, fmt::format("expected {}, got {}", expected, describe(v)));
    if (d > static_cast<double>(max))
      fail(key, fmt::format("{} is larger than {}, which no real model has", describe(v), max));
    if (d < static_cast<double>(min)) fail(key, fmt::format("expected {}, got {}", expected, describe(v)));
    value = static_cast<std::int64_t>(d);
  } else {
    fail(key, fmt::format("expected {}, got {}", expected, describe(v)));
  }
  if (value < min) fail(key, fmt::format("expected {}, got {}", expected, value));
  if (value > max) fail(key, fmt::format("{} is larger than {}, which no real model has", value, max));
  return value;
}

std::int64_t ConfigReader::require_size(std::string_view key) {
  const nlohmann::json* v = get(key);
  if (!v) fail(key, "required key is missing");
  return to_integer(key, *v, 1, kMaxDimension);
}

std::int64_t ConfigReader::require_layers(std::string_view key) {
  const nlohmann::json* v = get(key);
  if (!v) fail(key, "required key is missing");
  if (v->is_number() && v->get<double>() > static_cast<double>(kMaxLayers)) fail(key, too_many_layers(describe(*v)));
  return to_integer(key, *v, 1, kMaxLayers);
}

std::optional<std::int64_t> ConfigReader::optional_size(std::string_view key) {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  return to_integer(key, *v, 1, kMaxDimension);
}

std::int64_t ConfigReader::size_or(std::string_view key, std::int64_t fallback) {
  return optional_size(key).value_or(fallback);
}

std::optional<std::int64_t> ConfigReader::optional_count(std::string_view key) {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  return to_integer(key, *v, 0, kMaxDimension);
}

std::int64_t ConfigReader::count_or(std::string_view key, std::int64_t fallback) {
  return optional_count(key).value_or(fallback);
}

double ConfigReader::number_or(std::string_view key, double fallback) {
  const nlohmann::json* v = get(key);
  if (!v) return fallback;
  if (!v->is_number()) fail(key, fmt::format("expected a number, got {}", describe(*v)));
  double d = v->get<double>();
  if (!std::isfinite(d)) fail(key, fmt::format("expected a finite number, got {}", describe(*v)));
  return d;
}

bool ConfigReader::bool_or(std::string_view key, bool fallback) {
  const nlohmann::json* v = get(key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(key, fmt::format("expected true or false, got {}", describe(*v)));
  return v->get<bool>();
}

std::optional<std::string> ConfigReader::optional_string(std::string_view key) {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail(key, fmt::format("expected a string, got {}", describe(*v)));
  return v->get<std::string>();
}

std::string ConfigReader::string_or(std::string_view key, std::string fallback) {
  return optional_string(key).value_or(std::move(fallback));
}

std::vector<std::int64_t> ConfigReader::count_list_or(std::string_view key, std::vector<std::int64_t> fallback) {
  const nlohmann::json* v = get(key);
  if (!v) return fallback;
  if (!v->is_array()) fail(key, fmt::format("expected a list of integers, got {}", describe(*v)));
  if (v->size() > static_cast<std::size_t>(kMaxCount))
    fail(key, fmt::format("a list of {} entries is longer than any real model needs", v->size()));
  std::vector<std::int64_t> out;
  out.reserve(v->size());
  for (const auto& item : *v) out.push_back(to_integer(key, item, 0, kMaxDimension));
  return out;
}

std::optional<std::vector<std::string>> ConfigReader::optional_string_list(std::string_view key) {
  const nlohmann::json* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) fail(key, fmt::format("expected a list of strings, got {}", describe(*v)));
  if (v->size() > static_cast<std::size_t>(kMaxCount))
    fail(key, fmt::format("a list of {} entries is longer than any real model needs", v->size()));
  std::vector<std::string> out;
  out.reserve(v->size());
  for (const auto& item : *v) {
    if (!item.is_string()) fail(key, fmt::format("expected a list of strings, found {}", describe(item)));
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::optional<std::string> ConfigReader::first_present(std::initializer_list<std::string_view> keys) const {
  for (auto k : keys)
    if (has(k)) return std::string(k);
  return std::nullopt;
}

}  // namespace mme
