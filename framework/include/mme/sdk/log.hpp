// Logging: spdlog's default logger, whose one sink routes each line to the sink of the request
// running on the calling thread (ScopedLogSink), or else to stderr. stdout carries only results.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace mme {

// Sets up the stderr route (the CLI's logger); level is one of trace, debug, info, warn, error,
// off. Colour only on a terminal and never when NO_COLOR is set. Lines of a thread bound to a
// ScopedLogSink do not reach it.
void init_logging(std::string_view level);

// Whether stderr gets colour: a terminal that announces colour (TERM, COLORTERM) and NO_COLOR
// unset or empty. The log lines and the error line follow the same rule.
bool stderr_colour();

// The line `mme: error: MESSAGE\n` as the CLI prints it, "error" coloured as spdlog colours its
// error level when stderr_colour(). MESSAGE must already be printable (mme/sdk/input_text.hpp).
std::string error_line(std::string_view message);

// Where the log lines of one request go: `level` is spdlog's name of the line's level ("trace",
// "debug", "info", "warning", "error", "critical"), `message` is already printable.
using LogSink = std::function<void(std::string_view level, std::string_view message)>;

// While it lives, the log lines the calling thread writes at `level` (trace, debug, info, warn,
// err, critical, off; "warning" and "error" too) or above go to `sink`, not to stderr; lines
// below `level` are dropped. Other threads are not affected, so requests that run at the same
// time each get their own lines. Bindings nest: the previous one is back when this one ends.
class ScopedLogSink {
 public:
  ScopedLogSink(LogSink sink, std::string_view level);
  ~ScopedLogSink();
  ScopedLogSink(const ScopedLogSink&) = delete;
  ScopedLogSink& operator=(const ScopedLogSink&) = delete;

  struct Binding;

 private:
  std::unique_ptr<Binding> binding_;
  const Binding* previous_;
};

// A sink that writes where a line of the calling thread goes now (its binding, or stderr at the
// init_logging level), for a binding that filters and passes the rest on.
LogSink current_log_sink();

// A sink that writes each line to stderr as the CLI's logger does (`mme: warning: ...`, the level
// coloured when stderr_colour()), whole lines under a lock that fork() leaves usable in the child.
LogSink stderr_log_sink();

}  // namespace mme
