// What the browser build has instead of the files it does not compile (web/CMakeLists.txt):
//   framework/src/engine/plugin_loader.cpp (Boost.DLL): executable_dir() (there is no executable
//     on disk; the bundled models are /models, the command layer's context says so),
//     plugin_search_path() (no folder: the page names none) and load_plugins() (never reached:
//     no folder to load from);
//   framework/src/inputs/spec/parser_yaml.cpp (yaml-cpp): parse_yaml. A spec file's YAML is not read
//     in the page (the page writes spec files, through spec/writer.cpp, and reads none).
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <mme/engine/plugin_loader.hpp>
#include <mme/sdk/error.hpp>

#include "../../framework/src/inputs/spec/spec_internal.hpp"

namespace mme {

std::filesystem::path executable_dir() { return {}; }

std::vector<std::filesystem::path> plugin_search_path(const std::vector<std::filesystem::path>& cli_dirs,
                                                      std::string_view, bool) {
  return cli_dirs;
}

void load_plugins(Registry&, const std::vector<std::filesystem::path>& dirs) {
  if (!dirs.empty()) throw PluginError("the page loads no plugin files; its plugins are built in");
}

namespace spec_detail {
Node parse_yaml(std::string_view, const std::string& source) {
  throw ConfigError(source + ": YAML spec files are not read in the page (give the spec as JSON)");
}
}  // namespace spec_detail

}  // namespace mme
