// Where the plugins of a command line come from: --plugin-dir, then MME_PLUGIN_PATH, then
// <exe>/../lib/mme/plugins. A file of its own, so that the command-line fuzzer (fuzz/) can
// compile the CLI without it and link the plugins from their static archives instead.
#include "context.hpp"

namespace mme::cli {

commands::PluginSource plugin_source(const CommonSettings& settings) {
  commands::PluginSource p;
  p.dirs = settings.plugin_dirs;
  return p;
}

}  // namespace mme::cli
