#include "mme/sdk/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <spdlog/details/os.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "mme/sdk/input_text.hpp"

#include <pthread.h>
#include <unistd.h>

namespace mme {

struct ScopedLogSink::Binding {
  LogSink sink;
  spdlog::level::level_enum level;
};

namespace {

// The binding of the calling thread (a request's sink), or null: stderr.
thread_local const ScopedLogSink::Binding* t_binding = nullptr;

spdlog::level::level_enum level_of(std::string_view name) {
  if (name == "warning") return spdlog::level::warn;
  if (name == "error") return spdlog::level::err;
  return spdlog::level::from_str(std::string(name));
}

// A mutex that fork() leaves unlocked in the child: the prepare handler takes it, so no other
// thread holds it while the process is copied, and both sides release it afterwards.
class ForkSafeMutex {
 public:
  ForkSafeMutex() {
    ::pthread_atfork([] { instance().lock(); }, [] { instance().unlock(); }, [] { instance().unlock(); });
  }
  static std::mutex& instance() {
    static std::mutex m;
    return m;
  }
};

std::mutex& stderr_mutex() {
  static ForkSafeMutex registered;
  return ForkSafeMutex::instance();
}

std::shared_ptr<spdlog::sinks::sink> colour_sink();

// The one sink of the default logger. Messages carry strings from input (paths, config values,
// plugin file names): each message is made printable before any sink sees it, so no input reaches
// the terminal as an escape sequence. The colour sink's own colours are added after.
class RoutingSink final : public spdlog::sinks::sink {
 public:
  void log(const spdlog::details::log_msg& msg) override {
    const std::string text = printable(std::string_view(msg.payload.data(), msg.payload.size()));
    if (const ScopedLogSink::Binding* b = t_binding) {
      if (b->level == spdlog::level::off || msg.level < b->level) return;
      const auto name = spdlog::level::to_string_view(msg.level);
      b->sink(std::string_view(name.data(), name.size()), text);
      return;
    }
    write_stderr(msg, text);
  }
  // The stderr route, whatever the thread's binding (the payload already printable).
  void write_stderr(const spdlog::details::log_msg& msg, const std::string& text) {
    std::shared_ptr<spdlog::sinks::sink> out;
    {
      const std::lock_guard<std::mutex> lock(stderr_mutex());
      if (level_ == spdlog::level::off || msg.level < level_) return;
      out = stderr_;
    }
    if (!out) {
      // The first line of a thread without a binding, before init_logging: stderr, as the CLI's
      // (made here, not at start-up: a host whose requests all bind a sink never reads NO_COLOR).
      auto made = colour_sink();
      const std::lock_guard<std::mutex> lock(stderr_mutex());
      if (!stderr_) stderr_ = std::move(made);
      out = stderr_;
    }
    spdlog::details::log_msg copy(msg);
    copy.payload = spdlog::string_view_t(text.data(), text.size());
    out->log(copy);
  }
  void flush() override {
    std::shared_ptr<spdlog::sinks::sink> out;
    {
      const std::lock_guard<std::mutex> lock(stderr_mutex());
      out = stderr_;
    }
    if (out) out->flush();
  }
  void set_pattern(const std::string&) override {}
  void set_formatter(std::unique_ptr<spdlog::formatter>) override {}

  void set_stderr(std::shared_ptr<spdlog::sinks::sink> out, spdlog::level::level_enum level) {
    const std::lock_guard<std::mutex> lock(stderr_mutex());
    stderr_ = std::move(out);
    level_ = level;
  }
  spdlog::level::level_enum stderr_level() {
    const std::lock_guard<std::mutex> lock(stderr_mutex());
    return level_;
  }

 private:
  std::shared_ptr<spdlog::sinks::sink> stderr_;  // null until init_logging: nothing is written
  spdlog::level::level_enum level_ = spdlog::level::warn;
};

std::shared_ptr<spdlog::sinks::sink> colour_sink() {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(stderr_colour() ? spdlog::color_mode::always
                                                                                    : spdlog::color_mode::never);
  sink->set_pattern("mme: %^%l%$: %v");
  return sink;
}

// Installed once and never replaced: a logger swapped while another thread logs would be a race.
// The logger passes every level; the route decides.
RoutingSink& routing() {
  static RoutingSink* const sink = [] {
    auto routing_sink = std::make_shared<RoutingSink>();
    auto logger = std::make_shared<spdlog::logger>("mme", routing_sink);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
    return routing_sink.get();  // the logger owns it for the life of the process
  }();
  return *sink;
}

// The ANSI colour spdlog's colour sink gives each level.
const char* level_colour(std::string_view level) {
  if (level == "trace") return "\033[37m";
  if (level == "debug") return "\033[36m";
  if (level == "info") return "\033[32m";
  if (level == "warning") return "\033[33m\033[1m";
  if (level == "error") return "\033[31m\033[1m";
  if (level == "critical") return "\033[1m\033[41m";
  return "";
}

}  // namespace

bool stderr_colour() {
  // no-color.org: NO_COLOR set to a non-empty value turns colour off. spdlog's own test for a
  // terminal that announces colour (COLORTERM, or a TERM it knows) decides the rest.
  const char* no_colour = std::getenv("NO_COLOR");
  return ::isatty(STDERR_FILENO) && (no_colour == nullptr || *no_colour == '\0') &&
         spdlog::details::os::is_color_terminal();
}

std::string error_line(std::string_view message) {
  // The colour of spdlog's "error" level (red, bold), around the level name only, as the
  // pattern of init_logging() does for warnings.
  if (stderr_colour()) return fmt::format("mme: \033[31m\033[1merror\033[m: {}\n", message);
  return fmt::format("mme: error: {}\n", message);
}

void init_logging(std::string_view level) { routing().set_stderr(colour_sink(), level_of(level)); }

ScopedLogSink::ScopedLogSink(LogSink sink, std::string_view level)
    : binding_(std::make_unique<Binding>(Binding{std::move(sink), level_of(level)})), previous_(t_binding) {
  (void)routing();
  t_binding = binding_.get();
}

ScopedLogSink::~ScopedLogSink() { t_binding = previous_; }

LogSink current_log_sink() {
  if (const ScopedLogSink::Binding* b = t_binding) {
    LogSink sink = b->sink;
    const auto level = b->level;
    return [sink, level](std::string_view name, std::string_view message) {
      if (level != spdlog::level::off && level_of(name) >= level) sink(name, message);
    };
  }
  return [](std::string_view name, std::string_view message) {
    // Without a binding: the stderr route (a binding made later on this thread may pass its lines
    // here, so not through the routing, which would hand them back to it).
    spdlog::details::log_msg msg(spdlog::source_loc{}, "mme", level_of(name),
                                 spdlog::string_view_t(message.data(), message.size()));
    routing().write_stderr(msg, std::string(message));
  };
}

LogSink stderr_log_sink() {
  const bool colour = stderr_colour();
  return [colour](std::string_view level, std::string_view message) {
    const std::string line = colour ? fmt::format("mme: {}{}\033[m: {}\n", level_colour(level), level, message)
                                    : fmt::format("mme: {}: {}\n", level, message);
    const std::lock_guard<std::mutex> lock(stderr_mutex());
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  };
}

}  // namespace mme
