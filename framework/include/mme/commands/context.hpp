// The command layer (libmme_commands): typed requests in, typed results out, for every front end
// of mme: the CLI (cli/), the C entry point (capi/), the Python module (python/) and the browser
// page (web/). A request runs with a Context, the per-request state every use case shares: where
// plugins and GPU profiles come from, the user's environment (read once by the front end), the
// log sink. Nothing of it travels through environment variables or process globals, so requests
// with different contexts run at the same time on different threads (docs/architecture.md).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <mme/engine/registry.hpp>
#include <mme/inputs/model_source.hpp>
#include <mme/sdk/log.hpp>

namespace mme::commands {

// The user's settings that mme reads from the environment (docs/cli.md, "Environment"), as
// values. A front end reads them once, when nothing else can change the environment (the CLI at
// start-up; the Python module with the GIL held; the C entry point at the start of each call),
// and hands them to the layer; the layer itself never calls getenv.
struct Environment {
  std::string plugin_path;                  // MME_PLUGIN_PATH: plugin folders, colon-separated
  std::vector<std::string> hardware_path;   // MME_HARDWARE_PATH: folders of JSON GPU profiles
  std::vector<std::string> hardware_files;  // MME_HARDWARE_FILES: JSON GPU profile files
  SourceEnvironment sources;                // MME_MODELS_PATH, HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, the cache
  static Environment from_process();
};

// A plugin linked into the program (the C entry point, the Python module, the page, the
// fuzzers): registered after the plugin files, without dlopen.
struct BuiltinPlugin {
  std::string name;
  std::string version;
  void (*register_plugin)(Registrar&) = nullptr;
};

// Where the plugins of a request come from.
struct PluginSource {
  std::vector<std::filesystem::path> dirs;  // --plugin-dir, in order (then Environment::plugin_path)
  bool install_dir = true;                  // <exe>/../lib/mme/plugins (the CLI; not an embedding host)
  std::vector<BuiltinPlugin> builtins;      // registered after the files, in order
};

struct Context {
  PluginSource plugins;
  std::vector<std::filesystem::path> hardware_files;  // --hardware-file, each checked to exist
  Environment environment;
  bool offline = false;           // no hub download, whatever HF_HUB_OFFLINE says
  bool terminal_notices = false;  // a download may say what it fetches on a stderr terminal (the CLI)
  // The request's log lines: `log` at `log_level` (trace, debug, info, warn, err, off), or, when
  // `log` is empty, the process's stderr route (init_logging) at its level.
  LogSink log;
  std::string log_level = "warn";
};

// The registry of a context's plugins and hardware files: loaded once per distinct set of
// inputs (the plugin folders and files, the hardware files with their sizes and times) and kept
// in a small process-wide cache, so repeated requests reuse it. Immutable once loaded: requests
// on several threads share it. The log lines of the load are replayed into every request that
// gets the registry, so each sees the warnings a fresh load would give. Throws NotFoundError for
// a --hardware-file that is missing or not a regular file.
std::shared_ptr<const Registry> load_registry(const Context& context);

// The model-source options of a context: its environment, offline and notice settings, and
// `revision` (empty: main).
SourceOptions source_options(const Context& context, const std::string& revision = {});

// --log-level's value as Context::log_level takes it: trace, debug, info, warn (or warning), error
// (err), critical, off; UsageError naming the flag otherwise.
std::string parse_log_level(const std::string& text);

// While it lives, the log lines of the calling thread go where the context says.
class RequestLog {
 public:
  explicit RequestLog(const Context& context);

 private:
  std::unique_ptr<ScopedLogSink> scope_;
};

}  // namespace mme::commands
