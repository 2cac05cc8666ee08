// The CLI's commands run in-process, for programs that embed mme: the C entry point (mme_c.h,
// libmme_c) and the Python module (python/). Both build this folder's static library
// mme_embedded: every cli/*.cpp but main.cpp, the built-in plugins linked in (no plugin file is
// loaded unless a folder is named), and the request/response layer below.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <mme/engine/registry.hpp>
#include <mme/sdk/plugin.hpp>

namespace mme::embedded {

inline constexpr int kApiVersion = 1;  // MME_C_API_VERSION

// What a host sets for every request.
struct RunDefaults {
  // The bundled models, when the request names no "models_dir" (empty: beside the executable,
  // as the CLI has them).
  std::filesystem::path models_dir;
};

// Runs one request (docs/python.md, "The C entry point") and returns the response document as
// JSON text. Never throws: a bad request is an error document (UsageError, exit code 2). Calls
// are serialised by a process-wide lock.
std::string run_request(std::string_view request_json, const RunDefaults& defaults = {});

// The request's "args" object as the argument vector of `mme COMMAND`: keys are flag names with
// '_' or '-' ("num_layers_in_last_pipeline_stage"), the positional argument under "model"
// (estimate, plan, params, compare, init) or "cases" (validate). Throws UsageError.
std::vector<std::string> request_argv(const std::string& command, const nlohmann::ordered_json& args);

// The setup schema as data (the "schema" command): every knob's flags, aliases, switches,
// Megatron-LM spellings, kind and range, and the Megatron-LM flags that describe the model.
nlohmann::ordered_json schema_document();

// The built-in plugins, in the order the loader would load their files (sorted by name); the
// list is generated from the CMake property MME_BUILTIN_PLUGIN_NAMES (cmake/MmePlugin.cmake).
struct BuiltinPlugin {
  const char* name;
  const PluginInfo* (*info)();
};
const std::vector<BuiltinPlugin>& builtin_plugins();
// Registers every built-in plugin (path empty: linked into the program).
void register_builtin_plugins(Registry& registry);

// Where log messages of the running request go: captured into the response (the default) or
// to stderr as the CLI writes them. Set by run_request, read by the replaced load_registry.
struct LogCapture {
  bool to_stderr = false;
  std::vector<std::pair<std::string, std::string>> lines;  // (level, message)
};
LogCapture& current_log();
// Applies the CLI's --log-level (the level names of init_logging) to the request's logger.
void apply_log_level(std::string_view level);

}  // namespace mme::embedded
