// The use cases that read one model or list what is loaded: params, models, hardware, plugins.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <mme/commands/context.hpp>
#include <mme/engine/estimator.hpp>
#include <mme/inputs/model_source.hpp>

namespace mme::commands {

// ---- params: exact parameter counts of one model --------------------------------------------

struct ParamsRequest {
  std::string model;  // MODEL
  std::string revision;
  std::optional<std::string> lora_rank;            // --lora-rank R (text, read by the setup schema)
  std::optional<std::string> lora_target_modules;  // --lora-target-modules (needs lora_rank)
};

struct ParamsResult {
  ModelSpec model;
  Estimator::ParamCount counts;
  // Every group the report names, in a fixed order (zero when the model has none), then any
  // other group the engine reported; total and active.
  std::vector<std::pair<std::string, std::int64_t>> total, active;
  std::optional<LoraSettings> lora;  // with --lora-rank: the adapters, the only trainable parameters
  Estimator::LoraCount lora_counts;
};

ParamsResult params(const ParamsRequest& request, const Context& context);

// ---- models: the bundled configs --------------------------------------------------------------

struct ModelEntry {
  BundledModel bundled;
  ModelSpec model;
  Estimator::ParamCount counts;
};
// Every bundled model that adapts (one that does not costs a warning naming it and why).
std::vector<ModelEntry> models(const Context& context);

// ---- hardware: the GPU profiles ----------------------------------------------------------------

struct HardwareResult {
  std::shared_ptr<const Registry> registry;
  std::vector<const Registered<HardwareProfile>*> profiles;  // smallest memory first
};
HardwareResult hardware(const Context& context);

// ---- plugins: what was loaded from where --------------------------------------------------------

struct PluginsResult {
  std::shared_ptr<const Registry> registry;  // plugins() and rejected()
  std::vector<std::filesystem::path> search_path;
};
PluginsResult plugins(const Context& context);

}  // namespace mme::commands
