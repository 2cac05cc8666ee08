// A Registry holding the config adapters and layer models from the static plugin archives,
// registered the way the loader registers plugins (Registry::register_plugin).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <mme/engine/registry.hpp>
#include <mme/sdk/model_spec.hpp>

namespace mme::test {

// The built-in adapters (the plugins named adapter_*), without the prefix: "deepseek", "qwen", ...
const std::vector<std::string>& all_adapter_names();
// A registry with the built-in layer models and the named adapters (all of them by default).
std::unique_ptr<Registry> make_registry(const std::vector<std::string>& adapters = all_adapter_names());
const Registry& full_registry();

// The parsed bundled config of `model` (org/name).
nlohmann::json bundled_json(const std::string& model);

// Adapts a config as the CLI does (best adapter, adapt, validate).
ModelSpec adapt(const nlohmann::json& config, const std::string& source = "config.json",
                const Registry& registry = full_registry());

// Per decoder layer: whether its MLP block is the MoE kind.
inline std::vector<bool> moe_pattern(const ModelSpec& spec) {
  std::vector<bool> out;
  for (const auto& l : spec.layers) out.push_back(l.mlp.kind == "moe");
  return out;
}

inline bool any_warning_contains(const ModelSpec& spec, const std::string& text) {
  for (const auto& w : spec.warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace mme::test
