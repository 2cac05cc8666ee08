#include "mme/log.hpp"

#include <cstdlib>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

namespace mme {

void init_logging(std::string_view level) {
  // no-color.org: NO_COLOR set to a non-empty value turns colour off.
  const char* no_colour = std::getenv("NO_COLOR");
  const bool colour = ::isatty(STDERR_FILENO) && (no_colour == nullptr || *no_colour == '\0');
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(colour ? spdlog::color_mode::automatic
                                                                           : spdlog::color_mode::never);
  auto logger = std::make_shared<spdlog::logger>("mme", sink);
  logger->set_pattern("mme: %^%l%$: %v");
  logger->set_level(spdlog::level::from_str(std::string(level)));
  spdlog::set_default_logger(logger);
}

}  // namespace mme
