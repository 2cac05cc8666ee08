#include <iostream>

#include <fmt/core.h>

#include <mme/sdk/error.hpp>
#include <mme/sdk/version.hpp>

#include "command.hpp"

namespace mme::cli {

void help_version(std::ostream& out) {
  out << "Usage: mme version\n       mme --version\n\nPrints the version of mme, of libmme, and the plugin API "
         "version.\n";
}

int run_version(const std::vector<std::string>& args) {
  if (!args.empty()) throw UsageError(fmt::format("version takes no arguments, got '{}'", args.front()));
  std::cout << fmt::format("mme {} (libmme {}, plugin API {}, ABI {})\n", MME_VERSION_STRING, library_version(),
                           kPluginApiVersion, kAbiTag);
  return 0;
}

}  // namespace mme::cli
