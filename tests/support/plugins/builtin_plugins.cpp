#include "builtin_plugins.hpp"

#include <stdexcept>

namespace mme::test {

namespace {

void add(Registry& registry, const PluginInfo& info) {
  if (!registry.register_plugin(info.name, info.version, "", info.register_plugin))
    throw std::runtime_error(std::string("registering the built-in plugin ") + info.name + " failed");
}

}  // namespace

std::vector<std::string> builtin_plugin_names(std::string_view prefix) {
  std::vector<std::string> out;
  for (PluginEntryFn* entry : builtin_plugin_entries())
    if (std::string_view name = entry()->name; name.substr(0, prefix.size()) == prefix) out.emplace_back(name);
  return out;
}

void register_builtin_plugins(Registry& registry, std::string_view prefix) {
  bool any = false;
  for (PluginEntryFn* entry : builtin_plugin_entries()) {
    const PluginInfo& info = *entry();
    if (std::string_view(info.name).substr(0, prefix.size()) != prefix) continue;
    add(registry, info);
    any = true;
  }
  if (!any) throw std::runtime_error("no built-in plugin's name starts with '" + std::string(prefix) + "'");
}

void register_builtin_plugin(Registry& registry, std::string_view name) {
  for (PluginEntryFn* entry : builtin_plugin_entries())
    if (entry()->name == name) return add(registry, *entry());
  throw std::runtime_error("no built-in plugin '" + std::string(name) + "'");
}

}  // namespace mme::test
