#include "mme/engine/registry.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "mme/sdk/error.hpp"
#include "mme/sdk/text.hpp"

namespace mme {

namespace {

// A shared_ptr to `object` that also owns `library`: the object is destroyed first, then the
// library handle is released, so plugin code is never unloaded under a live object.
template <class T>
std::shared_ptr<const T> pin(std::shared_ptr<const T> object, std::shared_ptr<void> library) {
  if (!library) return object;
  struct Holder {
    std::shared_ptr<void> library;    // destroyed last
    std::shared_ptr<const T> object;  // destroyed first
  };
  auto holder = std::make_shared<Holder>(Holder{std::move(library), std::move(object)});
  const T* raw = holder->object.get();
  return std::shared_ptr<const T>(std::move(holder), raw);
}

// True when `key` (normalised) is the profile's name or one of its aliases.
bool find_in(const HardwareProfile& h, const std::string& key) {
  if (normalize_hardware_name(h.name) == key) return true;
  return std::any_of(h.aliases.begin(), h.aliases.end(),
                     [&](const std::string& a) { return normalize_hardware_name(a) == key; });
}

}  // namespace

void Registry::set_load_settings(LoadSettings settings) {
  settings_ = std::make_shared<const LoadSettings>(std::move(settings));
}

Registry::~Registry() {
  // Objects before libraries: clear the categories explicitly, then drop the library handles.
  adapters_.clear();
  layer_models_.clear();
  hardware_.clear();
  libraries_.clear();
}

void Registry::add_adapter(std::shared_ptr<const ConfigAdapter> adapter) {
  if (!adapter) throw PluginError("add_adapter: null adapter");
  adapters_.push_back({std::move(adapter), {}});
}

void Registry::add_layer_model(std::shared_ptr<const LayerMemoryModel> model) {
  if (!model) throw PluginError("add_layer_model: null layer model");
  layer_models_.push_back({std::move(model), {}});
}

void Registry::add_hardware(HardwareProfile profile) {
  if (profile.name.empty()) throw PluginError("add_hardware: a hardware profile needs a name");
  if (profile.memory_bytes <= 0)
    throw PluginError(fmt::format("add_hardware: '{}' has no memory capacity", profile.name));
  if (profile.reserved_bytes < 0 || profile.reserved_bytes >= profile.memory_bytes)
    throw PluginError(fmt::format("add_hardware: '{}' reserves more memory than it has", profile.name));
  for (const auto& f : kThroughputFigures)
    if (const std::string why = throughput_problem(f, profile.*f.member, false); !why.empty())
      throw PluginError(fmt::format("add_hardware: '{}': {}", profile.name, why));
  if (profile.gpus_per_node < 0 || profile.gpus_per_node > kMaxGpusPerNode)
    throw PluginError(fmt::format("add_hardware: '{}': gpus_per_node {} is not between 0 (unknown) and {}",
                                  profile.name, profile.gpus_per_node, kMaxGpusPerNode));
  hardware_.push_back({std::make_shared<const HardwareProfile>(std::move(profile)), {}});
}

void Registry::record_rejected(std::string path, std::string reason) {
  spdlog::warn("plugin {} rejected: {}", path, reason);
  rejected_.push_back({std::move(path), std::move(reason)});
}

bool Registry::register_plugin(const std::string& name, const std::string& version, const std::string& path,
                               const std::function<void(Registrar&)>& register_fn, std::shared_ptr<void> keep_alive) {
  const std::string where = path.empty() ? name : path;
  if (name.empty()) {
    record_rejected(where, "the plugin has an empty name");
    return false;
  }
  for (const auto& p : plugins_) {
    if (p.name == name) {
      record_rejected(where, fmt::format("a plugin named '{}' is already loaded from {}", name,
                                         p.path.empty() ? "the executable" : p.path));
      return false;
    }
  }

  Registry staged;
  staged.host_ = this;
  try {
    register_fn(staged);
  } catch (const std::exception& e) {
    record_rejected(where, fmt::format("registration of '{}' threw: {}", name, e.what()));
    return false;
  } catch (...) {
    record_rejected(where, fmt::format("registration of '{}' threw a non-standard exception", name));
    return false;
  }

  // Check every name against what is registered and within the staged set before merging.
  std::set<std::string> seen;
  for (const auto& a : staged.adapters_) {
    std::string key = lower(a.object->name());
    if (key.empty()) {
      record_rejected(where, "it registers a config adapter with an empty name");
      return false;
    }
    if (!seen.insert("adapter:" + key).second || find_adapter(key)) {
      record_rejected(where, fmt::format("config adapter '{}' is already registered", a.object->name()));
      return false;
    }
  }
  for (const auto& l : staged.layer_models_) {
    std::string key = lower(l.object->kind());
    if (key.empty()) {
      record_rejected(where, "it registers a layer model with an empty kind");
      return false;
    }
    if (!seen.insert("layer:" + key).second || find_layer_model(key)) {
      record_rejected(where, fmt::format("layer model '{}' is already registered", l.object->kind()));
      return false;
    }
  }
  // Hardware profiles are values, independent of each other and of the plugin's code, so a
  // name that is taken costs only that name: a taken alias is dropped from its profile, a
  // taken canonical name drops that profile; each with one warning that names the owner. The
  // plugin's other profiles, adapters and layer models load.
  std::map<std::string, std::string> staged_names;  // normalised name -> profile of this plugin
  std::vector<std::shared_ptr<const HardwareProfile>> accepted;
  auto owner_of = [&](const std::string& key) -> std::optional<std::string> {
    if (const auto it = staged_names.find(key); it != staged_names.end())
      return fmt::format("this plugin's profile '{}'", it->second);
    for (const auto& h : hardware_)
      if (find_in(*h.object, key)) return fmt::format("profile '{}' of plugin '{}'", h.object->name, h.plugin);
    return std::nullopt;
  };
  for (const auto& h : staged.hardware_) {
    const HardwareProfile& profile = *h.object;
    const std::string key = normalize_hardware_name(profile.name);
    if (const auto owner = owner_of(key)) {
      spdlog::warn("plugin {}: hardware profile '{}' skipped: its name is already a name of {}", where, profile.name,
                   *owner);
      continue;
    }
    HardwareProfile kept = profile;
    kept.aliases.clear();
    std::set<std::string> own{key};  // a profile's aliases may repeat its own name in another spelling
    for (const auto& alias : profile.aliases) {
      const std::string akey = normalize_hardware_name(alias);
      if (akey.empty() || own.count(akey)) {
        kept.aliases.push_back(alias);
        continue;
      }
      if (const auto owner = owner_of(akey)) {
        spdlog::warn("plugin {}: hardware alias '{}' of profile '{}' dropped: it is already a name of {}", where, alias,
                     profile.name, *owner);
        continue;
      }
      own.insert(akey);
      kept.aliases.push_back(alias);
    }
    for (const auto& k : own) staged_names.emplace(k, profile.name);
    accepted.push_back(std::make_shared<const HardwareProfile>(std::move(kept)));
  }

  PluginRecord record{name, version, path, {}, {}, {}};
  for (auto& a : staged.adapters_) {
    record.adapters.emplace_back(a.object->name());
    adapters_.push_back({pin(std::move(a.object), keep_alive), name});
  }
  for (auto& l : staged.layer_models_) {
    record.layer_models.emplace_back(l.object->kind());
    layer_models_.push_back({pin(std::move(l.object), keep_alive), name});
  }
  for (auto& h : accepted) {
    record.hardware.push_back(h->name);
    hardware_.push_back({std::move(h), name});  // a value copy: no plugin code behind it
  }
  staged.adapters_.clear();
  staged.layer_models_.clear();
  staged.hardware_.clear();
  plugins_.push_back(std::move(record));
  if (keep_alive) libraries_.push_back(std::move(keep_alive));
  spdlog::debug("plugin '{}' {} loaded{}", name, version, path.empty() ? "" : " from " + path);
  return true;
}

const ConfigAdapter* Registry::find_adapter(std::string_view name) const {
  const std::string key = lower(name);
  for (const auto& a : adapters_)
    if (lower(a.object->name()) == key) return a.object.get();
  return nullptr;
}

const LayerMemoryModel* Registry::find_layer_model(std::string_view kind) const {
  for (const auto& l : layer_models_)
    if (l.object->kind() == kind) return l.object.get();
  const std::string key = lower(kind);
  for (const auto& l : layer_models_)
    if (lower(l.object->kind()) == key) return l.object.get();
  return nullptr;
}

const HardwareProfile* Registry::find_hardware(std::string_view name_or_alias) const {
  const std::string key = normalize_hardware_name(name_or_alias);
  if (key.empty()) return nullptr;
  for (const auto& h : hardware_) {
    if (normalize_hardware_name(h.object->name) == key) return h.object.get();
    for (const auto& a : h.object->aliases)
      if (normalize_hardware_name(a) == key) return h.object.get();
  }
  return nullptr;
}

std::string Registry::hardware_owner(std::string_view name_or_alias) const {
  const HardwareProfile* h = find_hardware(name_or_alias);
  if (!h) return {};
  for (const auto& r : hardware_)
    if (r.object.get() == h) return r.plugin;
  return {};
}

const ConfigAdapter* Registry::best_adapter(const nlohmann::json& config) const {
  const ConfigAdapter* best = nullptr;
  int best_score = 0;
  for (const auto& a : adapters_) {
    int score = 0;
    try {
      score = a.object->match(config);
    } catch (const std::exception& e) {
      spdlog::warn("config adapter '{}' failed to score the config: {}", a.object->name(), e.what());
      continue;
    }
    if (score > best_score) {
      best = a.object.get();
      best_score = score;
    }
  }
  return best;
}

}  // namespace mme
