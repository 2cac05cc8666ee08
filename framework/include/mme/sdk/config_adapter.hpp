// ConfigAdapter: the plugin interface that turns a model description (a Hugging Face
// config.json, Megatron-LM flags, ...) into a ModelSpec. The registry asks every adapter to
// score a config; the best score wins, the generic fallback scores lowest.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // an adapter reads the config with the full library (config_reader.hpp)

#include "mme/sdk/model_spec.hpp"

namespace mme {

struct ConfigInput {
  const nlohmann::json& config;  // the config object (a multimodal config's text_config)
  std::string name;              // what the user asked for, e.g. "Qwen/Qwen3-8B"
  std::string source;            // the file or URL, for error messages
};

// Scores, by convention: 0 = cannot handle; 10 = generic fallback; 100 = the family's own
// model_type; 200 = an exact architecture match that must beat a family adapter.
class ConfigAdapter {
 public:
  virtual ~ConfigAdapter() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  // The model_type values this adapter is written for (documentation and `mme plugins`).
  virtual std::vector<std::string> model_types() const = 0;
  virtual int match(const nlohmann::json& config) const = 0;
  // Throws ConfigError naming the source and the key on bad input.
  virtual ModelSpec adapt(const ConfigInput& input) const = 0;
};

}  // namespace mme
