// Registrar: what a plugin's registration function receives. It can only add objects of the
// three categories and look at what the host already holds; it cannot remove, reject or query
// anything else of the host. The host's Registry implements it (mme/engine/registry.hpp).
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace mme {

class ConfigAdapter;
class LayerMemoryModel;
struct HardwareProfile;

// A read-only view of what the plugins loaded before this one registered.
class HostView {
 public:
  virtual const ConfigAdapter* find_adapter(std::string_view name) const = 0;
  virtual const LayerMemoryModel* find_layer_model(std::string_view kind) const = 0;
  // By canonical name or alias, ignoring case, '-', '_' and spaces.
  virtual const HardwareProfile* find_hardware(std::string_view name_or_alias) const = 0;
  // The plugin that registered the profile `name_or_alias` finds; empty when there is none.
  virtual std::string hardware_owner(std::string_view name_or_alias) const = 0;

 protected:
  ~HostView() = default;
};

class Registrar {
 public:
  virtual void add_adapter(std::shared_ptr<const ConfigAdapter> adapter) = 0;
  virtual void add_layer_model(std::shared_ptr<const LayerMemoryModel> model) = 0;
  virtual void add_hardware(HardwareProfile profile) = 0;
  // While a plugin registers: what the host holds already, so a plugin can skip a name that is
  // taken instead of being rejected for it. nullptr outside a registration.
  virtual const HostView* host() const = 0;

 protected:
  ~Registrar() = default;
};

}  // namespace mme
