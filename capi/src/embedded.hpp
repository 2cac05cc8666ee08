// The request layer of the embedding hosts: the C entry point (mme_c.h, libmme_c) and the Python
// module (python/). A JSON request is read into the typed request of the command layer
// (mme/commands/), run there, and its typed result written back as JSON: no command line is built,
// no output captured, no lock held, no environment variable set. Both hosts link this folder's
// static library mme_embedded: this layer and the built-in plugins (no plugin file is loaded
// unless a folder is named).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <mme/commands/context.hpp>

namespace mme::embedded {

inline constexpr int kApiVersion = 1;  // MME_C_API_VERSION

// The bounds of a request: its size, how deep its JSON nests (a request is three levels deep:
// {"args": {"key": [...]}}), and the entries of one list.
inline constexpr std::size_t kMaxRequestBytes = std::size_t{1} << 20;
inline constexpr int kMaxRequestDepth = 8;
inline constexpr std::size_t kMaxListEntries = 4096;

// What a host sets for every request.
struct RunDefaults {
  // The bundled models, when the request names no "models_dir" (empty: beside the executable,
  // as the CLI has them).
  std::filesystem::path models_dir;
  // The user's environment (mme/commands/context.hpp), read by the host where nothing else can
  // change it (Python: with the GIL held); none: read at the start of the call.
  std::optional<commands::Environment> environment;
};

// Runs one request (docs/python.md, "The C entry point") and returns the response document as
// JSON text. Never throws: a bad request is an error document (UsageError, exit code 2). Requests
// run concurrently; each has its own context.
std::string run_request(std::string_view request_json, const RunDefaults& defaults = {});

// The built-in plugins, in the order the loader would load their files (sorted by name); the
// list is generated from the CMake property MME_BUILTIN_PLUGIN_NAMES (cmake/MmePlugin.cmake).
const std::vector<commands::BuiltinPlugin>& builtin_plugins();

}  // namespace mme::embedded
