// What every subcommand sets up the same way: logging and the plugin registry.
#pragma once

#include <mme/engine/registry.hpp>

#include "options.hpp"

namespace mme::cli {

// Initialises logging and loads the plugins from the search path.
void load_registry(Registry& registry, const CommonSettings& settings);

// --hardware-file FILE (repeatable): JSON GPU profiles for the json_profiles plugin, which
// cannot see the command line. use_hardware_files() checks that each file exists and appends
// it to MME_HARDWARE_FILES (colon-separated), where the plugin reads it; call it before
// load_registry. docs/plugin-authoring.md describes the file format.
void add_hardware_file_option(po::options_description& options);
void use_hardware_files(const po::variables_map& vm);

// True when stdout is a terminal and colour is allowed (no NO_COLOR).
bool stdout_is_tty();
bool colour_allowed();

}  // namespace mme::cli
