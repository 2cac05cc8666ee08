// From a MODEL argument to a validated ModelSpec: resolve the source, pick the best config
// adapter, adapt, validate.
#pragma once

#include <string>

#include "mme/engine/registry.hpp"
#include "mme/inputs/model_source.hpp"
#include "mme/sdk/model_spec.hpp"

namespace mme {

// Adapts an already-parsed config. Throws PluginError when no adapter claims it (naming the
// model_type and the adapters that are loaded) and ConfigError for bad values.
// The adapter's warnings (what it cannot honour) are logged, one line each, and kept in
// ModelSpec::warnings; with log_warnings false they are only kept (`mme models` lists many
// models and shows them with --verbose).
ModelSpec adapt_config(const nlohmann::json& config, const std::string& name, const std::string& source,
                       const Registry& registry);
ModelSpec adapt_config(const nlohmann::json& config, const std::string& name, const std::string& source,
                       const Registry& registry, bool log_warnings);

ModelSpec load_model(const std::string& arg, const Registry& registry, const SourceOptions& options = {});

}  // namespace mme
