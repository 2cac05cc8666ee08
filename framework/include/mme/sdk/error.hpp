// Error types. Every error the tool reports carries the exit code the CLI returns for it
// (docs/cli.md lists them) and a message that says what, where and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mme {

enum class ExitCode : int {
  kOk = 0,
  kInternal = 1,       // a bug: an unexpected exception
  kUsage = 2,          // bad command line
  kBadModel = 3,       // model/config could not be read or makes no sense
  kBadLayout = 4,      // the parallel layout is invalid for this model
  kPlugin = 5,         // plugin problem that stops the command (e.g. no adapter for a model)
  kNotFound = 6,       // model or file not found, download failed
  kInterrupted = 130,  // stopped by the user (Ctrl-C): 128 + SIGINT, as shells report it
};

// The longest error message: a message quotes input (a model id, a path, a value) and input may
// be megabytes (a 10 MB model id was once echoed whole).
inline constexpr std::size_t kMaxErrorMessageBytes = 4096;

// `message` fit for an error: each NUL byte written as the two characters "\0" (what() is a C
// string, so a NUL from input, which the C API and Python can pass, once cut the message short),
// and a message longer than kMaxErrorMessageBytes cut in the middle, its beginning and its end
// kept (where the problem is named) around "[... N bytes left out ...]", UTF-8 sequences whole.
std::string bounded_message(std::string_view message);

// Every error class has its key function (the destructor) defined in libmme, so its vtable and
// type_info live in the SDK, not in the plugin that throws it: an error thrown by a plugin stays
// valid after the plugin's library is unloaded, and is caught by type across modules.
// The message is kept as bounded_message() makes it: readable through what() whole (no NUL byte
// ends it early) and at most kMaxErrorMessageBytes long, however much input it quotes.
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(bounded_message(message)), code_(code) {}
  Error(const Error&) = default;
  Error& operator=(const Error&) = default;
  ~Error() override;
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ExitCode::kUsage, message) {}
  UsageError(const UsageError&) = default;
  UsageError& operator=(const UsageError&) = default;
  ~UsageError() override;
};

// A model description (config.json, Megatron flags, spec file) that cannot be used.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message) : Error(ExitCode::kBadModel, message) {}
  ConfigError(const ConfigError&) = default;
  ConfigError& operator=(const ConfigError&) = default;
  ~ConfigError() override;
};

// A parallel layout Megatron would reject for this model.
class LayoutError : public Error {
 public:
  explicit LayoutError(const std::string& message) : Error(ExitCode::kBadLayout, message) {}
  LayoutError(const LayoutError&) = default;
  LayoutError& operator=(const LayoutError&) = default;
  ~LayoutError() override;
};

class PluginError : public Error {
 public:
  explicit PluginError(const std::string& message) : Error(ExitCode::kPlugin, message) {}
  PluginError(const PluginError&) = default;
  PluginError& operator=(const PluginError&) = default;
  ~PluginError() override;
};

class NotFoundError : public Error {
 public:
  explicit NotFoundError(const std::string& message) : Error(ExitCode::kNotFound, message) {}
  NotFoundError(const NotFoundError&) = default;
  NotFoundError& operator=(const NotFoundError&) = default;
  ~NotFoundError() override;
};

// Work stopped on the user's request (a cancellation flag set by a Ctrl-C handler, or Python's
// KeyboardInterrupt).
class InterruptedError : public Error {
 public:
  explicit InterruptedError(const std::string& message) : Error(ExitCode::kInterrupted, message) {}
  InterruptedError(const InterruptedError&) = default;
  InterruptedError& operator=(const InterruptedError&) = default;
  ~InterruptedError() override;
};

[[noreturn]] void rethrow_as_sdk_error(const Error& e);
[[noreturn]] void rethrow_as_sdk_error(const std::exception& e, const char* what);
[[noreturn]] void rethrow_unknown(const char* what);

// Runs `f`, a call into plugin code, and rethrows whatever it throws as an error constructed
// here in libmme (message copied), so no exception object refers to plugin code once the call
// has returned. `what` names the call for messages about non-standard exceptions.
template <class F>
decltype(auto) call_plugin(const char* what, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    rethrow_as_sdk_error(e);
  } catch (const std::exception& e) {
    rethrow_as_sdk_error(e, what);
  } catch (...) {
    rethrow_unknown(what);
  }
}

// The sizes that divide n, for an error that names the values that would work:
// "1, 2 or 4" (at most `max_items`, the largest kept; "..." marks the ones left out).
std::string divisors_text(std::int64_t n, std::size_t max_items = 12);

}  // namespace mme
