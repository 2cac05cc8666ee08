// PluginLoader: finds and loads plugin libraries into a Registry. A broken plugin (not a
// library, no entry symbol, wrong API version or ABI, a throwing registration, a duplicate
// name) costs one warning naming the file and the reason; the others still load.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "mme/engine/registry.hpp"

namespace mme {

// The folders searched, in order: each --plugin-dir, then MME_PLUGIN_PATH (colon-separated),
// then the folder next to the executable (<exe>/../lib/mme/plugins). Never the current folder
// unless asked.
std::vector<std::filesystem::path> plugin_search_path(const std::vector<std::filesystem::path>& cli_dirs);
// The same with MME_PLUGIN_PATH given as a value (`env_plugin_path`, colon-separated, read by
// the front end), and the folder next to the executable only when `install_dir`.
std::vector<std::filesystem::path> plugin_search_path(const std::vector<std::filesystem::path>& cli_dirs,
                                                      std::string_view env_plugin_path, bool install_dir = true);

// Loads every regular file ending in .so in each folder (sorted by name, first occurrence of
// a plugin name wins). Missing folders given explicitly are warned about.
void load_plugins(Registry& registry, const std::vector<std::filesystem::path>& dirs);

// Loads one library. Returns false (and records the reason in the registry) on failure.
bool load_plugin_file(Registry& registry, const std::filesystem::path& file);

// The directory of the running executable (/proc/self/exe).
std::filesystem::path executable_dir();

}  // namespace mme
