// The plugin registry of an embedded run: cli/context.cpp's load_registry is renamed out of the
// way (capi/CMakeLists.txt, as fuzz/ does) and replaced here. The folders the CLI would search
// are searched as well (--plugin-dir, MME_PLUGIN_PATH) but the one beside the executable, which
// belongs to the program that embeds mme (python3, a C program), not to mme; then the built-in
// plugins register from their static archives, in the loader's order.
#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include <mme/engine/plugin_loader.hpp>
#include <mme/sdk/log.hpp>

#include "context.hpp"
#include "embedded.hpp"

namespace fs = std::filesystem;

namespace mme {

namespace embedded {

LogCapture& current_log() {
  static LogCapture capture;
  return capture;
}

void apply_log_level(std::string_view level) {
  if (current_log().to_stderr) {
    init_logging(level);  // exactly the CLI's logger
    return;
  }
  spdlog::default_logger()->set_level(spdlog::level::from_str(std::string(level)));
}

void register_builtin_plugins(Registry& registry) {
  for (const BuiltinPlugin& p : builtin_plugins()) {
    const PluginInfo* info = p.info();
    // Compiled with this host: the API version and ABI tag match by construction.
    if (!registry.register_plugin(info->name, info->version, "", info->register_plugin))
      spdlog::warn("built-in plugin '{}' was not registered: a plugin of that name is already loaded", info->name);
  }
}

}  // namespace embedded

namespace cli {

void load_registry(Registry& registry, const CommonSettings& settings) {
  embedded::apply_log_level(settings.log_level);
  std::vector<fs::path> dirs = plugin_search_path(settings.plugin_dirs);
  if (const fs::path exe = executable_dir(); !exe.empty()) {
    const fs::path beside = exe / ".." / "lib" / "mme" / "plugins";
    dirs.erase(std::remove(dirs.begin(), dirs.end(), beside), dirs.end());
  }
  // No plugin file, no dlopen: the built-in plugins need none.
  if (!dirs.empty()) load_plugins(registry, dirs);
  embedded::register_builtin_plugins(registry);
}

}  // namespace cli

}  // namespace mme
