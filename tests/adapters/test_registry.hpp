// A Registry holding the config adapters and layer models from the static plugin archives,
// registered the way the loader registers plugins (Registry::register_plugin).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <mme/sdk/model_spec.hpp>
#include <mme/engine/registry.hpp>

namespace mme::test {

// Adapters by plugin name: "deepseek", "moonlight_kimi", "qwen", "generic_hf".
const std::vector<std::string>& all_adapter_names();
// A registry with the four layer models and the named adapters (all of them by default).
std::unique_ptr<Registry> make_registry(const std::vector<std::string>& adapters = all_adapter_names());
const Registry& full_registry();

// The parsed bundled config of `model` (org/name).
nlohmann::json bundled_json(const std::string& model);

// Adapts a config as the CLI does (best adapter, adapt, validate).
ModelSpec adapt(const nlohmann::json& config, const std::string& source = "config.json",
                const Registry& registry = full_registry());

}  // namespace mme::test
