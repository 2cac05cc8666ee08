// Registry: the three plugin categories (config adapters, layer-memory models, hardware
// profiles), keyed by name, each entry remembering which plugin gave it. The core knows only
// these categories, never a concrete family, block kind or GPU.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mme/sdk/config_adapter.hpp"
#include "mme/sdk/hardware_profile.hpp"
#include "mme/sdk/layer_model.hpp"
#include "mme/sdk/load_settings.hpp"
#include "mme/sdk/registrar.hpp"

namespace mme {

template <class T>
struct Registered {
  std::shared_ptr<const T> object;  // keeps the plugin library loaded while it lives
  std::string plugin;               // the plugin that registered it
};

struct PluginRecord {
  std::string name;
  std::string version;
  std::string path;  // empty for plugins linked into the executable
  std::vector<std::string> adapters, layer_models, hardware;
};

struct RejectedPlugin {
  std::string path;
  std::string reason;
};

// The host's registry. Plugins see it only as the add-only Registrar (mme/sdk/registrar.hpp)
// and its read-only HostView (and, through load_settings(host), the settings of the load).
class Registry final : public Registrar, public HostView, public LoadSettingsSource {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  Registry(Registry&&) noexcept = default;
  Registry& operator=(Registry&&) noexcept = default;
  ~Registry();

  // Called by plugins from their registration function (Registrar).
  void add_adapter(std::shared_ptr<const ConfigAdapter> adapter) override;
  void add_layer_model(std::shared_ptr<const LayerMemoryModel> model) override;
  void add_hardware(HardwareProfile profile) override;

  // Runs a plugin's registration function into a staging registry and merges the result.
  // Nothing is merged if the function throws or an adapter name or layer kind is already
  // taken: the plugin is recorded as rejected with the reason, and false is returned. A taken
  // hardware name costs only that name: the alias is dropped from its profile (a canonical
  // name: the profile is skipped), with a warning naming the profile and plugin that own it.
  // `keep_alive` (the plugin's library) is held by every object the plugin registered.
  bool register_plugin(const std::string& name, const std::string& version, const std::string& path,
                       const std::function<void(Registrar&)>& register_fn, std::shared_ptr<void> keep_alive = nullptr);
  void record_rejected(std::string path, std::string reason);

  const std::vector<Registered<ConfigAdapter>>& adapters() const { return adapters_; }
  const std::vector<Registered<LayerMemoryModel>>& layer_models() const { return layer_models_; }
  const std::vector<Registered<HardwareProfile>>& hardware() const { return hardware_; }
  const std::vector<PluginRecord>& plugins() const { return plugins_; }
  const std::vector<RejectedPlugin>& rejected() const { return rejected_; }

  // A plugin's registration function fills a staging registry, merged only if the whole
  // registration succeeds (register_plugin). While it runs, host() is the registry it will be
  // merged into, holding what the plugins loaded before it registered: a plugin can look a
  // name up there and skip it instead of being rejected for it. nullptr outside a registration.
  const HostView* host() const override { return host_; }

  const ConfigAdapter* find_adapter(std::string_view name) const override;
  const LayerMemoryModel* find_layer_model(std::string_view kind) const override;
  // By canonical name or alias, ignoring case, '-', '_' and spaces.
  const HardwareProfile* find_hardware(std::string_view name_or_alias) const override;
  std::string hardware_owner(std::string_view name_or_alias) const override;
  // The settings the plugins read while they register (mme/sdk/load_settings.hpp); set before
  // loading. Without them a plugin uses its own defaults (json_profiles: the environment).
  void set_load_settings(LoadSettings settings);
  const LoadSettings* load_settings() const override { return settings_ ? settings_.get() : nullptr; }
  // The adapter with the highest positive match score, or nullptr. Ties go to the adapter
  // registered first.
  const ConfigAdapter* best_adapter(const nlohmann::json& config) const;

 private:
  std::vector<Registered<ConfigAdapter>> adapters_;
  std::vector<Registered<LayerMemoryModel>> layer_models_;
  std::vector<Registered<HardwareProfile>> hardware_;
  std::vector<PluginRecord> plugins_;
  std::vector<RejectedPlugin> rejected_;
  std::vector<std::shared_ptr<void>> libraries_;
  const Registry* host_ = nullptr;
  std::shared_ptr<const LoadSettings> settings_;
};

}  // namespace mme
