#include <iostream>

#include <fmt/core.h>

#include <mme/commands/documents.hpp>
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
  const commands::PluginsResult result = commands::plugins(make_context(vm, read_common(vm)));
  if (switch_on(vm, "json")) {
    std::cout << json_text(commands::plugins_document(result), 2) << "\n";
    return 0;
  }
  const Registry& registry = *result.registry;
  const auto& dirs = result.search_path;
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
