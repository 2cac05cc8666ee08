#include "context.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/core.h>

#include <mme/engine/plugin_loader.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/log.hpp>

#include <unistd.h>

namespace mme::cli {

void load_registry(Registry& registry, const CommonSettings& settings) {
  init_logging(settings.log_level);
  load_plugins(registry, plugin_search_path(settings.plugin_dirs));
}

void add_hardware_file_option(po::options_description& options) {
  options.add_options()("hardware-file", files_value(),
                        "also load the GPU profiles of this JSON file (repeatable; format in "
                        "docs/plugin-authoring.md)");
}

void use_hardware_files(const po::variables_map& vm) {
  if (!vm.count("hardware-file")) return;
  const char* env = std::getenv("MME_HARDWARE_FILES");
  std::string files = env ? env : "";
  for (const auto& f : vm["hardware-file"].as<std::vector<std::string>>()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(f, ec))
      throw NotFoundError(fmt::format("--hardware-file: {}: {}", f,
                                      std::filesystem::exists(f, ec) ? "not a regular file" : "no such file"));
    if (f.find(':') != std::string::npos)
      throw UsageError(fmt::format("--hardware-file: {}: a path with ':' cannot be passed on", f));
    files += (files.empty() ? "" : ":") + f;
  }
  ::setenv("MME_HARDWARE_FILES", files.c_str(), 1);
}

bool stdout_is_tty() { return ::isatty(STDOUT_FILENO) != 0; }

bool colour_allowed() {
  const char* no_colour = std::getenv("NO_COLOR");
  return stdout_is_tty() && (no_colour == nullptr || *no_colour == '\0');
}

}  // namespace mme::cli
