#include "context.hpp"

#include <cstdlib>

#include <unistd.h>

#include <mme/log.hpp>
#include <mme/plugin_loader.hpp>

namespace mme::cli {

void load_registry(Registry& registry, const CommonSettings& settings) {
  init_logging(settings.log_level);
  load_plugins(registry, plugin_search_path(settings.plugin_dirs));
}

bool stdout_is_tty() { return ::isatty(STDOUT_FILENO) != 0; }

bool colour_allowed() {
  const char* no_colour = std::getenv("NO_COLOR");
  return stdout_is_tty() && (no_colour == nullptr || *no_colour == '\0');
}

}  // namespace mme::cli
