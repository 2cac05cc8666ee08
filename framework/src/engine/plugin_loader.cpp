#include "mme/engine/plugin_loader.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <system_error>

#include <boost/dll/shared_library.hpp>
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "mme/sdk/plugin.hpp"

#include <dlfcn.h>

namespace fs = std::filesystem;

namespace mme {

namespace {
constexpr const char* kOldEntrySymbol = "mme_plugin_entry";
}  // namespace

fs::path executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return exe.parent_path();
}

std::vector<fs::path> plugin_search_path(const std::vector<fs::path>& cli_dirs, std::string_view env_plugin_path,
                                         bool install_dir) {
  // An empty entry ("--plugin-dir=", "MME_PLUGIN_PATH=a::b") names no folder; it must never
  // mean the current folder (docs/reliability.md, the trust model).
  std::vector<fs::path> dirs;
  for (const auto& d : cli_dirs)
    if (!d.empty()) dirs.push_back(d);
  std::stringstream ss{std::string(env_plugin_path)};
  for (std::string item; std::getline(ss, item, ':');)
    if (!item.empty()) dirs.emplace_back(item);
  if (install_dir)
    if (fs::path exe = executable_dir(); !exe.empty()) dirs.push_back(exe / ".." / "lib" / "mme" / "plugins");
  return dirs;
}

std::vector<fs::path> plugin_search_path(const std::vector<fs::path>& cli_dirs) {
  const char* env = std::getenv("MME_PLUGIN_PATH");
  return plugin_search_path(cli_dirs, env ? env : "");
}

bool load_plugin_file(Registry& registry, const fs::path& file) {
  const std::string where = file.string();
  std::error_code ec;
  auto library = std::make_shared<boost::dll::shared_library>();
  // Immediate binding: a plugin that needs a symbol this libmme lacks is refused here, with one
  // warning, instead of killing the process (exit 127) at its first call into that symbol.
  library->load(file, ec, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  if (ec || !library->is_loaded()) {
    const char* detail = ::dlerror();
    registry.record_rejected(where, fmt::format("not a loadable library ({})", detail ? detail : ec.message()));
    return false;
  }
  if (!library->has(MME_PLUGIN_ENTRY_SYMBOL)) {
    // Plugin API 2 and older exported a Boost.DLL alias; its value is not a function to call.
    if (library->has(kOldEntrySymbol))
      registry.record_rejected(where, fmt::format("built for plugin API version 2 or older (entry '{}'), this mme "
                                                  "speaks version {}: rebuild it against this SDK",
                                                  kOldEntrySymbol, kPluginApiVersion));
    else
      registry.record_rejected(where, "no '" MME_PLUGIN_ENTRY_SYMBOL "' entry symbol (not an mme plugin)");
    return false;
  }
  const PluginInfo* info = nullptr;
  try {
    auto& entry = library->get<PluginEntryFn>(MME_PLUGIN_ENTRY_SYMBOL);
    info = entry();
  } catch (const std::exception& e) {
    registry.record_rejected(where, fmt::format("the entry symbol failed: {}", e.what()));
    return false;
  } catch (...) {  // anything else would end in std::terminate (exit 134)
    registry.record_rejected(where, "the entry symbol threw a non-standard exception");
    return false;
  }
  if (!info) {
    registry.record_rejected(where, "the entry returned no plugin information");
    return false;
  }
  // The API version is the first field and the only one read before it is checked.
  if (info->api_version != kPluginApiVersion) {
    registry.record_rejected(where, fmt::format("built for plugin API version {}, this mme speaks version {}",
                                                info->api_version, kPluginApiVersion));
    return false;
  }
  if (!info->abi_tag || std::string_view(info->abi_tag) != kAbiTag) {
    registry.record_rejected(where, fmt::format("built with C++ ABI '{}', this mme uses '{}'",
                                                info->abi_tag ? info->abi_tag : "(none)", kAbiTag));
    return false;
  }
  if (!info->register_plugin || !info->name) {
    registry.record_rejected(where, "the plugin information has no name or no registration function");
    return false;
  }
  const std::string name = info->name;
  const std::string version = info->version ? info->version : "";
  auto fn = info->register_plugin;
  return registry.register_plugin(
      name, version, where, [fn](Registrar& r) { fn(r); }, library);
}

void load_plugins(Registry& registry, const std::vector<fs::path>& dirs) {
  std::set<fs::path> seen_files;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      // Folders the user named (--plugin-dir, MME_PLUGIN_PATH) are worth a warning when
      // missing; the default one beside the executable is not.
      const fs::path exe = executable_dir();
      if (!exe.empty() && dir == exe / ".." / "lib" / "mme" / "plugins")
        spdlog::debug("plugin folder {} does not exist", dir.string());
      else
        spdlog::warn("plugin folder {} does not exist or is not a folder", dir.string());
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::error_code ec2;
      if (!entry.is_regular_file(ec2)) continue;
      if (entry.path().extension() != ".so") continue;
      files.push_back(entry.path());
    }
    if (ec) {
      spdlog::warn("cannot read plugin folder {}: {}", dir.string(), ec.message());
      continue;
    }
    std::sort(files.begin(), files.end());
    // Resolve the folder once (the same folder may be named twice, through symlinks or '..'),
    // not every file: canonicalising costs a readlink per path component.
    std::error_code ec3;
    fs::path canonical_dir = fs::weakly_canonical(dir, ec3);
    if (ec3) canonical_dir = dir;
    for (const auto& f : files) {
      const fs::path canonical = canonical_dir / f.filename();
      if (!seen_files.insert(canonical).second) continue;
      load_plugin_file(registry, canonical);
    }
  }
}

}  // namespace mme
