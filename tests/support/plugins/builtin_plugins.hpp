// The built-in plugins, linked into the tests from their static archives and registered the way
// the loader registers a plugin file (Registry::register_plugin), without dlopen. The list is
// generated from the plugins the build has (tests/CMakeLists.txt), so no test names each plugin.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <mme/engine/registry.hpp>
#include <mme/sdk/plugin.hpp>

namespace mme::test {

// Every built-in plugin's entry, in the loader's order (generated: test_plugins/builtin_entries.cpp).
const std::vector<PluginEntryFn*>& builtin_plugin_entries();

// The names of the built-in plugins that start with `prefix` ("layer_", "adapter_", "hw_").
std::vector<std::string> builtin_plugin_names(std::string_view prefix = "");

// Registers every built-in plugin whose name starts with `prefix`; throws std::runtime_error when
// there is none or the registry refuses one.
void register_builtin_plugins(Registry& registry, std::string_view prefix = "");

// Registers the built-in plugin `name`; throws std::runtime_error when there is none or the
// registry refuses it.
void register_builtin_plugin(Registry& registry, std::string_view name);

}  // namespace mme::test
