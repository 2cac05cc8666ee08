// Logging: spdlog's default logger, writing to stderr, so stdout carries only results.
#pragma once

#include <string>
#include <string_view>

namespace mme {

// Sets up the stderr logger; level is one of trace, debug, info, warn, error, off.
// Colour only on a terminal and never when NO_COLOR is set.
void init_logging(std::string_view level);

// Whether stderr gets colour: a terminal that announces colour (TERM, COLORTERM) and NO_COLOR
// unset or empty. The log lines and the error line follow the same rule.
bool stderr_colour();

// The line `mme: error: MESSAGE\n` as the CLI prints it, "error" coloured as spdlog colours its
// error level when stderr_colour(). MESSAGE must already be printable (mme/sdk/input_text.hpp).
std::string error_line(std::string_view message);

}  // namespace mme
