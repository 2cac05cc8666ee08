// Logging: spdlog's default logger, writing to stderr, so stdout carries only results.
#pragma once

#include <string_view>

namespace mme {

// Sets up the stderr logger; level is one of trace, debug, info, warn, error, off.
// Colour only on a terminal and never when NO_COLOR is set.
void init_logging(std::string_view level);

}  // namespace mme
