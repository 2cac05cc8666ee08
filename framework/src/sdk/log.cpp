#include "mme/sdk/log.hpp"

#include <cstdlib>
#include <string>

#include <spdlog/details/os.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "mme/sdk/input_text.hpp"

#include <unistd.h>

namespace mme {

namespace {
// Messages carry strings from input (paths, config values, plugin file names): each message is
// made printable before the colour sink writes it, so no input reaches the terminal as an
// escape sequence. The sink's own colours are added after.
class PrintableSink : public spdlog::sinks::sink {
 public:
  explicit PrintableSink(std::shared_ptr<spdlog::sinks::sink> next) : next_(std::move(next)) {}
  void log(const spdlog::details::log_msg& msg) override {
    const std::string text = printable(std::string_view(msg.payload.data(), msg.payload.size()));
    spdlog::details::log_msg copy(msg);
    copy.payload = spdlog::string_view_t(text.data(), text.size());
    next_->log(copy);
  }
  void flush() override { next_->flush(); }
  void set_pattern(const std::string& pattern) override { next_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    next_->set_formatter(std::move(formatter));
  }

 private:
  std::shared_ptr<spdlog::sinks::sink> next_;
};
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

void init_logging(std::string_view level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(stderr_colour() ? spdlog::color_mode::always
                                                                                    : spdlog::color_mode::never);
  auto logger = std::make_shared<spdlog::logger>("mme", std::make_shared<PrintableSink>(sink));
  logger->set_pattern("mme: %^%l%$: %v");
  logger->set_level(spdlog::level::from_str(std::string(level)));
  spdlog::set_default_logger(logger);
}

}  // namespace mme
