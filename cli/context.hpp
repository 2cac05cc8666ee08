// What every subcommand sets up the same way: the request context of the command layer
// (mme/commands/context.hpp) from the common flags, and the flags that become request fields.
#pragma once

#include <optional>
#include <string>

#include <mme/commands/estimate.hpp>

#include "options.hpp"

namespace mme::cli {

// The context of this process's one request: logging on stderr at --log-level (set up here), the
// plugin folders (--plugin-dir, then MME_PLUGIN_PATH, then <exe>/../lib/mme/plugins), the
// --hardware-file files of `vm` (when the command has the flag), the environment read now.
commands::Context make_context(const po::variables_map& vm, const CommonSettings& settings);
// The plugins a command line asks for (cli/plugin_source.cpp; the fuzzer has its own: fuzz/CMakeLists.txt).
commands::PluginSource plugin_source(const CommonSettings& settings);

// --hardware-file FILE (repeatable): JSON GPU profiles for the json_profiles plugin, handed to it
// as a value (docs/plugin-authoring.md describes the file format).
void add_hardware_file_option(po::options_description& options);

// The setup flags among the parsed flags (every knob of the setup schema, under any of its names).
commands::SetupFlags setup_flags(const po::variables_map& vm);
// MODEL, --megatron-args, --megatron-args-file, --config and --revision as given.
commands::ModelInput model_input(const po::variables_map& vm, const std::optional<std::string>& model);
// MODEL as the positional argument gives it (nullopt when absent).
std::optional<std::string> model_argument(const po::variables_map& vm);
// A value flag's text (nullopt when absent); a switch's state.
std::optional<std::string> flag_text(const po::variables_map& vm, const char* name);
bool switch_on(const po::variables_map& vm, const char* name);

// True when stdout is a terminal and colour is allowed (no NO_COLOR).
bool stdout_is_tty();
bool colour_allowed();

}  // namespace mme::cli
