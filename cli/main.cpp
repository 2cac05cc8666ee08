// mme: per-GPU memory estimates for Megatron-LM training. Dispatches to one subcommand.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/log.hpp>

#include "command.hpp"

namespace {

// Errors are one line on stderr; stdout stays empty so `--json > file` never holds half a report.
int report_error(const std::string& message, mme::ExitCode code) {
  // No control characters from input reach the terminal (mme/sdk/input_text.hpp).
  const std::string line = mme::error_line(mme::printable(message));
  std::fputs(line.c_str(), stderr);
  return static_cast<int>(code);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    mme::cli::help_help(std::cerr);
    return static_cast<int>(mme::ExitCode::kUsage);
  }
  const mme::cli::Invocation inv = mme::cli::parse_invocation(std::move(args));
  if (!inv.command) return report_error(mme::cli::unknown_command_message(inv.name), mme::ExitCode::kUsage);
  if (inv.wants_help) {
    inv.command->help(std::cout);
    return 0;
  }
  try {
    // Log lines go to stderr from the start: what is logged before a command loads its plugins
    // (and sets the --log-level it was given) must not reach stdout, which may be JSON.
    mme::init_logging("warn");
    const int rc = inv.command->run(inv.args);
    std::cout.flush();
    if (!std::cout) return report_error("cannot write to standard output", mme::ExitCode::kInternal);
    return rc;
  } catch (const mme::Error& e) {
    return report_error(e.what(), e.code());
  } catch (const std::bad_alloc&) {
    return report_error("out of memory", mme::ExitCode::kInternal);
  } catch (const std::exception& e) {
    return report_error(std::string("internal error: ") + e.what(), mme::ExitCode::kInternal);
  }
}
