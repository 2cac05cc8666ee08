// The context of a request: the environment as values, the registry cache, the request's log.
#include "mme/commands/context.hpp"

#include <algorithm>
#include <cstdlib>
#include <list>
#include <mutex>
#include <sstream>
#include <system_error>
#include <tuple>
#include <utility>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <mme/engine/plugin_loader.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>

#include <pthread.h>

namespace fs = std::filesystem;

namespace mme::commands {

namespace {

std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::vector<std::string> colon_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ':');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// What a file or folder entry looks like now, for the cache key: a changed file is a new load.
struct Stamp {
  std::string path;
  std::uintmax_t size = 0;
  std::int64_t time = 0;
  // (No defaulted <=>: the browser build's libc++ has no three-way comparison of strings.)
  bool operator==(const Stamp&) const = default;
  bool operator<(const Stamp& o) const { return std::tie(path, size, time) < std::tie(o.path, o.size, o.time); }
};

Stamp stamp(const fs::path& p) {
  Stamp s{p.string()};
  std::error_code ec;
  s.size = fs::file_size(p, ec);
  if (ec) s.size = 0;
  const auto t = fs::last_write_time(p, ec);
  if (!ec) s.time = static_cast<std::int64_t>(t.time_since_epoch().count());
  return s;
}

// The entries of a folder with one of `extension` (a plugin folder's .so, a hardware folder's
// .json), each stamped.
void stamp_folder(const fs::path& dir, const char* extension, std::vector<Stamp>& out) {
  out.push_back({dir.string() + "/", 0, 0});
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<Stamp> here;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().extension() == extension) here.push_back(stamp(it->path()));
  std::sort(here.begin(), here.end());
  out.insert(out.end(), here.begin(), here.end());
}

struct Key {
  std::vector<Stamp> plugin_files, hardware_files;
  std::vector<std::tuple<std::string, std::string, void (*)(Registrar&)>> builtins;
  bool operator==(const Key&) const = default;
};

struct Loaded {
  std::shared_ptr<const Registry> registry;
  std::vector<std::pair<std::string, std::string>> log;  // (level, message) of the load
};

// The cache: a few recent loads. Its mutex is taken around lookups and inserts only (a load runs
// outside it), and fork() leaves it unlocked in the child.
struct Cache {
  std::mutex mutex;
  std::list<std::pair<Key, Loaded>> entries;  // most recent first
  static constexpr std::size_t kCapacity = 8;
  Cache() {
    ::pthread_atfork([] { instance().mutex.lock(); }, [] { instance().mutex.unlock(); },
                     [] { instance().mutex.unlock(); });
  }
  static Cache& instance() {
    static Cache cache;
    return cache;
  }
};

void check_hardware_file(const fs::path& f) {
  std::error_code ec;
  if (!fs::is_regular_file(f, ec))
    throw NotFoundError(
        fmt::format("--hardware-file: {}: {}", f.string(), fs::exists(f, ec) ? "not a regular file" : "no such file"));
}

}  // namespace

Environment Environment::from_process() {
  Environment env;
  env.plugin_path = env_text("MME_PLUGIN_PATH");
  env.hardware_path = colon_list(env_text("MME_HARDWARE_PATH"));
  env.hardware_files = colon_list(env_text("MME_HARDWARE_FILES"));
  env.sources = SourceEnvironment::from_process();
  return env;
}

SourceOptions source_options(const Context& context, const std::string& revision) {
  SourceOptions o;
  if (!revision.empty()) o.revision = revision;
  o.environment = context.environment.sources;
  o.allow_network = !context.offline;
  o.download_notice = context.terminal_notices;
  return o;
}

std::string parse_log_level(const std::string& text) {
  for (const char* l : {"trace", "debug", "info", "warn", "warning", "error", "err", "critical", "off"})
    if (text == l) return text == "warning" ? "warn" : text == "error" ? "err" : text;
  throw UsageError(fmt::format("--log-level: unknown level '{}' (trace, debug, info, warn, error, off)", text));
}

RequestLog::RequestLog(const Context& context) {
  if (context.log) scope_ = std::make_unique<ScopedLogSink>(context.log, context.log_level);
}

std::shared_ptr<const Registry> load_registry(const Context& context) {
  for (const auto& f : context.hardware_files) check_hardware_file(f);
  const std::vector<fs::path> dirs =
      plugin_search_path(context.plugins.dirs, context.environment.plugin_path, context.plugins.install_dir);
  LoadSettings settings;
  settings.hardware_path = context.environment.hardware_path;
  settings.hardware_files = context.environment.hardware_files;
  for (const auto& f : context.hardware_files) settings.hardware_files.push_back(f.string());

  Key key;
  for (const auto& d : dirs) stamp_folder(d, ".so", key.plugin_files);
  for (const auto& d : settings.hardware_path) stamp_folder(d, ".json", key.hardware_files);
  for (const auto& f : settings.hardware_files) key.hardware_files.push_back(stamp(f));
  for (const auto& b : context.plugins.builtins) key.builtins.emplace_back(b.name, b.version, b.register_plugin);

  Cache& cache = Cache::instance();
  std::optional<Loaded> hit;
  {
    const std::lock_guard<std::mutex> lock(cache.mutex);
    const auto it =
        std::find_if(cache.entries.begin(), cache.entries.end(), [&](const auto& e) { return e.first == key; });
    if (it != cache.entries.end()) {
      hit = it->second;
      cache.entries.splice(cache.entries.begin(), cache.entries, it);
    }
  }
  if (!hit) {
    Loaded loaded;
    auto registry = std::make_shared<Registry>();
    registry->set_load_settings(settings);
    {
      // The load's lines are kept, and replayed below into this request and every later one.
      const ScopedLogSink capture(
          [&loaded](std::string_view level, std::string_view message) {
            loaded.log.emplace_back(std::string(level), std::string(message));
          },
          "trace");
      if (!dirs.empty()) load_plugins(*registry, dirs);
      for (const BuiltinPlugin& b : context.plugins.builtins)
        if (!registry->register_plugin(b.name, b.version, "", b.register_plugin))
          spdlog::warn("built-in plugin '{}' was not registered: a plugin of that name is already loaded", b.name);
    }
    loaded.registry = std::move(registry);
    hit = loaded;
    const std::lock_guard<std::mutex> lock(cache.mutex);
    cache.entries.emplace_front(std::move(key), std::move(loaded));
    if (cache.entries.size() > Cache::kCapacity) cache.entries.pop_back();
  }
  const LogSink out = current_log_sink();
  for (const auto& [level, message] : hit->log) out(level, message);
  return hit->registry;
}

}  // namespace mme::commands
