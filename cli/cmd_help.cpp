#include <iomanip>
#include <iostream>
#include <string_view>

#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/error.hpp>

#include "command.hpp"
#include "options.hpp"

namespace mme::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"estimate", "per-GPU memory of a training layout, per pipeline stage", run_estimate, help_estimate,
       options_estimate, Operand::kModel},
      {"init", "a commented spec file (YAML or JSON) to start from, for MODEL or an example", run_init, help_init,
       options_init, Operand::kModel},
      {"params", "exact total and active parameter counts of a model", run_params, help_params, options_params,
       Operand::kModel},
      {"plan", "search every layout of N GPUs that fits a GPU, ranked by a speed proxy", run_plan, help_plan,
       options_plan, Operand::kModel},
      // compare reads estimate's option table (a list where a flag varies).
      {"compare", "several layouts side by side (--tp 1,2,4 ...), each as `estimate` gives it", run_compare,
       help_compare, options_estimate, Operand::kModel},
      {"models", "the bundled model configs", run_models, help_models, options_models},
      {"validate", "compare estimates with measured Megatron-LM runs (a CSV, or a training log)", run_validate,
       help_validate, options_validate, Operand::kFile},
      {"hardware", "the GPU profiles the fit verdict knows", run_hardware, help_hardware, options_hardware},
      {"plugins", "loaded and rejected plugins", run_plugins, help_plugins, options_plugins},
      {"version", "version of mme, libmme and the plugin API", run_version, help_version},
      {"completion", "a completion script for bash, zsh or fish", run_completion, help_completion, nullptr,
       Operand::kShell},
      {"help", "help on a command", run_help, help_help, options_help, Operand::kCommand},
  };
  return table;
}

const Command* find_command(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

std::string unknown_command_message(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& c : commands()) names.emplace_back(c.name);
  // A flag in the command's place ("mme --tp 4") is not a misspelt command.
  const std::string suggestion = name.rfind('-', 0) == 0 ? std::string() : closest_name(name, names);
  if (!suggestion.empty()) return "unknown command '" + name + "'; did you mean '" + suggestion + "'?";
  return "unknown command '" + name + "' (see `mme help`)";
}

Invocation parse_invocation(std::vector<std::string> argv_tail) {
  Invocation inv;
  inv.name = argv_tail.front();
  if (inv.name == "--version" || inv.name == "-V") inv.name = "version";
  if (inv.name == "--help" || inv.name == "-h") inv.name = "help";
  inv.command = find_command(inv.name);
  inv.args.assign(argv_tail.begin() + 1, argv_tail.end());
  for (const auto& a : inv.args)
    if (a == "--help" || a == "-h") inv.wants_help = true;
  return inv;
}

void help_help(std::ostream& out) {
  out << "mme: how much GPU memory each rank needs to train a model with Megatron-LM.\n\n"
         "Usage: mme <command> [options]\n       mme help <command>\n       mme help --man [<command>]\n\n"
         "Commands:\n";
  for (const auto& c : commands())  // a name of 10 letters or more still gets a space
    out << "  " << std::left << std::setw(10) << c.name << (std::string_view(c.name).size() >= 10 ? " " : "")
        << c.summary << "\n";
  out << "\nExample:\n  mme estimate deepseek-ai/DeepSeek-V3 --tp 4 --pp 4 --ep 8 --num-gpus 128 \\\n"
         "      --num-layers-in-last-pipeline-stage 16\n\n"
         "Exit codes: 0 ok, 1 internal error, 2 usage, 3 bad model/config, 4 invalid layout,\n"
         "5 plugin error, 6 not found / download failed (docs/cli.md).\n";
}

po::options_description options_help() {
  po::options_description d("Options");
  d.add_options()("man", po::bool_switch(),
                  "print the man page (roff) of COMMAND, or of mme itself without one, instead of the help");
  return d;
}

int run_help(const std::vector<std::string>& args) {
  std::vector<std::string> names;
  bool man = false;
  for (const auto& a : args) {
    if (a == "--man")
      man = true;
    else if (a.rfind('-', 0) == 0 && a.size() > 1)
      throw UsageError(unknown_option_message("help", a, options_help()));
    else
      names.push_back(a);
  }
  if (names.size() > 1) throw UsageError("help takes at most one command name");
  const Command* c = nullptr;
  if (!names.empty()) {
    c = find_command(names.front());
    if (!c) throw UsageError(unknown_command_message(names.front()));
  }
  if (man)
    write_man_page(std::cout, c);
  else if (c)
    c->help(std::cout);
  else
    help_help(std::cout);
  return 0;
}

}  // namespace mme::cli
