#include "mme/log.hpp"

#include <cstdlib>
#include <string>

#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "mme/input_text.hpp"

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
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override { next_->set_formatter(std::move(formatter)); }

 private:
  std::shared_ptr<spdlog::sinks::sink> next_;
};
}  // namespace

void init_logging(std::string_view level) {
  // no-color.org: NO_COLOR set to a non-empty value turns colour off.
  const char* no_colour = std::getenv("NO_COLOR");
  const bool colour = ::isatty(STDERR_FILENO) && (no_colour == nullptr || *no_colour == '\0');
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(colour ? spdlog::color_mode::automatic
                                                                           : spdlog::color_mode::never);
  auto logger = std::make_shared<spdlog::logger>("mme", std::make_shared<PrintableSink>(sink));
  logger->set_pattern("mme: %^%l%$: %v");
  logger->set_level(spdlog::level::from_str(std::string(level)));
  spdlog::set_default_logger(logger);
}

}  // namespace mme
