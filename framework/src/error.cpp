#include "mme/error.hpp"

#include <string>

namespace mme {

Error::~Error() = default;
UsageError::~UsageError() = default;
ConfigError::~ConfigError() = default;
LayoutError::~LayoutError() = default;
PluginError::~PluginError() = default;
NotFoundError::~NotFoundError() = default;

void rethrow_as_sdk_error(const Error& e) {
  const std::string message = e.what();
  switch (e.code()) {
    case ExitCode::kUsage: throw UsageError(message);
    case ExitCode::kBadModel: throw ConfigError(message);
    case ExitCode::kBadLayout: throw LayoutError(message);
    case ExitCode::kPlugin: throw PluginError(message);
    case ExitCode::kNotFound: throw NotFoundError(message);
    default: throw Error(e.code(), message);
  }
}

void rethrow_as_sdk_error(const std::exception& e, const char* what) {
  throw PluginError(std::string(what) + ": " + e.what());
}

void rethrow_unknown(const char* what) { throw PluginError(std::string(what) + ": a non-standard exception"); }

}  // namespace mme
