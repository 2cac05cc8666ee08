// What every subcommand sets up the same way: logging and the plugin registry.
#pragma once

#include <mme/registry.hpp>

#include "options.hpp"

namespace mme::cli {

// Initialises logging and loads the plugins from the search path.
void load_registry(Registry& registry, const CommonSettings& settings);

// True when stdout is a terminal and colour is allowed (no NO_COLOR).
bool stdout_is_tty();
bool colour_allowed();

}  // namespace mme::cli
