// Error types. Every error the tool reports carries the exit code the CLI returns for it
// (docs/cli.md lists them) and a message that says what, where and why.
#pragma once

#include <stdexcept>
#include <string>

namespace mme {

enum class ExitCode : int {
  kOk = 0,
  kInternal = 1,     // a bug: an unexpected exception
  kUsage = 2,        // bad command line
  kBadModel = 3,     // model/config could not be read or makes no sense
  kBadLayout = 4,    // the parallel layout is invalid for this model
  kPlugin = 5,       // plugin problem that stops the command (e.g. no adapter for a model)
  kNotFound = 6,     // model or file not found, download failed
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ExitCode::kUsage, message) {}
};

// A model description (config.json, Megatron flags, spec file) that cannot be used.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message) : Error(ExitCode::kBadModel, message) {}
};

// A parallel layout Megatron would reject for this model.
class LayoutError : public Error {
 public:
  explicit LayoutError(const std::string& message) : Error(ExitCode::kBadLayout, message) {}
};

class PluginError : public Error {
 public:
  explicit PluginError(const std::string& message) : Error(ExitCode::kPlugin, message) {}
};

class NotFoundError : public Error {
 public:
  explicit NotFoundError(const std::string& message) : Error(ExitCode::kNotFound, message) {}
};

}  // namespace mme
