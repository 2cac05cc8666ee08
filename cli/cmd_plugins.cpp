#include <iostream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <mme/engine/plugin_loader.hpp>
#include <mme/inputs/json_schema.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/version.hpp>

#include "command.hpp"
#include "context.hpp"

namespace mme::cli {

namespace {
po::options_description visible_options() {
  po::options_description d("Options");
  d.add_options()("json", po::bool_switch(), "one JSON document on stdout");
  d.add(common_options());
  return d;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}
}  // namespace

void help_plugins(std::ostream& out) {
  out << "Usage: mme plugins [--json] [--plugin-dir DIR]...\n\n"
         "Lists the loaded plugins (name, version, file, what each registered) and the rejected\n"
         "ones with the reason. Search order: --plugin-dir, MME_PLUGIN_PATH, <exe>/../lib/mme/plugins.\n\n"
      << visible_options();
}

int run_plugins(const std::vector<std::string>& args) {
  const auto vm = parse("plugins", args, visible_options(), {}, {});
  Registry registry;
  const CommonSettings common = read_common(vm);
  load_registry(registry, common);
  const auto dirs = plugin_search_path(common.plugin_dirs);
  if (vm["json"].as<bool>()) {
    nlohmann::json j;
    j["schema_version"] = kSchemaVersion;
    j["api_version"] = kPluginApiVersion;
    j["abi_tag"] = std::string(kAbiTag);
    j["search_path"] = nlohmann::json::array();
    for (const auto& d : dirs) j["search_path"].push_back(d.lexically_normal().string());
    j["plugins"] = nlohmann::json::array();
    for (const auto& p : registry.plugins())
      j["plugins"].push_back({{"name", p.name},
                              {"version", p.version},
                              {"path", p.path},
                              {"adapters", p.adapters},
                              {"layer_models", p.layer_models},
                              {"hardware", p.hardware}});
    j["rejected"] = nlohmann::json::array();
    for (const auto& r : registry.rejected()) j["rejected"].push_back({{"path", r.path}, {"reason", r.reason}});
    std::cout << json_text(j, 2) << "\n";
    return 0;
  }
  std::cout << fmt::format("Plugin API {} ({})\nSearch path:\n", kPluginApiVersion, kAbiTag);
  // Folder and file names, and the loader's messages about them, come from the file system.
  for (const auto& d : dirs) std::cout << "  " << printable(d.lexically_normal().string()) << "\n";
  std::cout << fmt::format("\nLoaded ({}):\n", registry.plugins().size());
  for (const auto& p : registry.plugins()) {
    std::cout << fmt::format("  {} {}  {}\n", printable(p.name), printable(p.version), printable(p.path));
    if (!p.adapters.empty()) std::cout << "      config adapters: " << join(p.adapters) << "\n";
    if (!p.layer_models.empty()) std::cout << "      layer models:    " << join(p.layer_models) << "\n";
    if (!p.hardware.empty()) std::cout << "      hardware:        " << join(p.hardware) << "\n";
  }
  if (!registry.rejected().empty()) {
    std::cout << fmt::format("\nRejected ({}):\n", registry.rejected().size());
    for (const auto& r : registry.rejected())
      std::cout << fmt::format("  {}\n      {}\n", printable(r.path), printable(r.reason));
  }
  return 0;
}

po::options_description options_plugins() { return visible_options(); }

}  // namespace mme::cli
