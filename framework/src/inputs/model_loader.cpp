#include "mme/inputs/model_loader.hpp"

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "mme/engine/setup_checks.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"

namespace mme {

ModelSpec adapt_config(const nlohmann::json& config, const std::string& name, const std::string& source,
                       const Registry& registry) {
  return adapt_config(config, name, source, registry, true);
}

ModelSpec adapt_config(const nlohmann::json& config, const std::string& name, const std::string& source,
                       const Registry& registry, bool log_warnings) {
  if (!config.is_object())
    throw ConfigError(fmt::format("{}: expected a JSON object, got {}", source, config.type_name()));
  const ConfigAdapter* adapter = registry.best_adapter(config);
  if (!adapter) {
    std::string type = "(none)";
    if (auto it = config.find("model_type"); it != config.end() && it->is_string()) type = it->get<std::string>();
    std::string names;
    for (const auto& a : registry.adapters())
      names += std::string(names.empty() ? "" : ", ") + std::string(a.object->name());
    if (names.empty())
      throw PluginError(fmt::format("{}: no config adapter is loaded (check `mme plugins` and --plugin-dir)", source));
    throw ConfigError(
        fmt::format("{}: no config adapter understands model_type '{}' (loaded adapters: {}); the "
                    "generic adapter needs at least hidden_size, num_hidden_layers, "
                    "num_attention_heads and vocab_size",
                    source, type, names));
  }
  spdlog::debug("{}: adapted by '{}'", source, adapter->name());
  ModelSpec spec = call_plugin("config adapter", [&] { return adapter->adapt(ConfigInput{config, name, source}); });
  if (spec.name.empty()) spec.name = name;
  if (spec.source.empty()) spec.source = source;
  if (spec.adapter.empty()) spec.adapter = std::string(adapter->name());
  // Strings from the config are printed in reports: a hub repository's model_type must not
  // write escape sequences to the user's terminal (docs/reliability.md).
  for (std::string* text : {&spec.name, &spec.family, &spec.model_type, &spec.adapter}) *text = printable(*text);
  // A multimodal config (its vision_config at the top, or next to the text_config the model
  // source picked): the adapters read the language model only.
  if (auto v = config.find("vision_config"); v != config.end() && !v->is_null())
    spec.warnings.emplace_back("vision tower not modelled; the estimate covers the language model");
  for (auto& w : spec.warnings) w = printable(w);
  if (log_warnings)
    for (const auto& w : spec.warnings) spdlog::warn("{}: {}", source, w);
  validate_model_blocks(spec, registry);
  return spec;
}

ModelSpec load_model(const std::string& arg, const Registry& registry, const SourceOptions& options) {
  ResolvedModel resolved = resolve_model(arg, options);
  return adapt_config(resolved.config, resolved.name, resolved.path.string(), registry);
}

}  // namespace mme
