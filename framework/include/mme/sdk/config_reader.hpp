// ConfigReader: typed, error-reporting access to a JSON config for config adapters. Every
// error names the source and the key (`config.json: hidden_size: expected a positive
// integer, got "big"`), and the reader remembers which keys were read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mme/sdk/limits.hpp"

namespace mme {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& config, std::string source);

  bool has(std::string_view key) const;  // present and not null

  // Positive integers (sizes). Floats with an integral value (4096.0) are accepted.
  std::int64_t require_size(std::string_view key);
  std::optional<std::int64_t> optional_size(std::string_view key);
  std::int64_t size_or(std::string_view key, std::int64_t fallback);
  // A layer count: a positive integer at most kMaxLayers, too_many_layers() beyond it.
  std::int64_t require_layers(std::string_view key);
  // Non-negative integers (counts that may be zero, e.g. first_k_dense_replace).
  std::int64_t count_or(std::string_view key, std::int64_t fallback);
  std::optional<std::int64_t> optional_count(std::string_view key);

  double number_or(std::string_view key, double fallback);
  bool bool_or(std::string_view key, bool fallback);
  std::string string_or(std::string_view key, std::string fallback);
  std::optional<std::string> optional_string(std::string_view key);
  // A list of non-negative integers (e.g. mlp_only_layers).
  std::vector<std::int64_t> count_list_or(std::string_view key, std::vector<std::int64_t> fallback);
  // A list of strings (e.g. layer_types); nullopt when absent or null.
  std::optional<std::vector<std::string>> optional_string_list(std::string_view key);

  // The first key of `keys` that is present (Megatron-Bridge style "first match wins").
  std::optional<std::string> first_present(std::initializer_list<std::string_view> keys) const;

  [[noreturn]] void fail(std::string_view key, const std::string& what) const;
  const std::string& source() const { return source_; }
  const std::vector<std::string>& keys_read() const { return keys_read_; }

  // The bounds of every size read (limits.hpp, which says why).
  static constexpr std::int64_t kMaxDimension = limits::kMaxDimension;
  static constexpr std::int64_t kMaxCount = limits::kMaxCount;
  static constexpr std::int64_t kMaxLayers = limits::kMaxLayers;

 private:
  const nlohmann::json* get(std::string_view key);
  std::int64_t to_integer(std::string_view key, const nlohmann::json& v, std::int64_t min, std::int64_t max);

  const nlohmann::json& config_;
  std::string source_;
  std::vector<std::string> keys_read_;
};

// The message for a layer count beyond ConfigReader::kMaxLayers, for every input (HF configs,
// spec files, Megatron flags): "<count> layers is more than mme accepts (at most 512; ...)".
std::string too_many_layers(std::string_view count);

}  // namespace mme
