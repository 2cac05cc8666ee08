// The subcommand table of `mme`. Each subcommand lives in its own cmd_<name>.cpp.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace boost::program_options {
class options_description;
}

namespace mme::cli {

// What a command's positional argument is, for the shell completion and the man pages.
enum class Operand { kNone, kModel, kFile, kCommand, kShell };

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);  // returns the exit code
  void (*help)(std::ostream& out);
  // The options `help` lists (the visible ones; Megatron-LM alias spellings stay hidden), from
  // which `mme completion` and `mme help --man` are generated; nullptr: the command has none.
  boost::program_options::options_description (*options)() = nullptr;
  Operand operand = Operand::kNone;
};

const std::vector<Command>& commands();
const Command* find_command(const std::string& name);
// "unknown command 'estimat'; did you mean 'estimate'?" (or "... (see `mme help`)").
std::string unknown_command_message(const std::string& name);

// What `mme ARGS...` asks for: the command (null when the name is unknown), its name after
// the --version/--help aliases, its arguments, and whether --help/-h is among them (then the
// command's help is printed and nothing runs). main.cpp and the command-line fuzzer share it.
struct Invocation {
  std::string name;
  const Command* command = nullptr;
  std::vector<std::string> args;
  bool wants_help = false;
};
Invocation parse_invocation(std::vector<std::string> argv_tail);  // argv[1..], not empty

// Subcommand entry points.
int run_version(const std::vector<std::string>& args);
int run_help(const std::vector<std::string>& args);
int run_plugins(const std::vector<std::string>& args);
int run_hardware(const std::vector<std::string>& args);
int run_estimate(const std::vector<std::string>& args);
int run_init(const std::vector<std::string>& args);
int run_params(const std::vector<std::string>& args);
int run_plan(const std::vector<std::string>& args);
int run_compare(const std::vector<std::string>& args);
int run_models(const std::vector<std::string>& args);
int run_validate(const std::vector<std::string>& args);
int run_completion(const std::vector<std::string>& args);
void help_version(std::ostream& out);
void help_help(std::ostream& out);
void help_plugins(std::ostream& out);
void help_hardware(std::ostream& out);
void help_estimate(std::ostream& out);
void help_init(std::ostream& out);
void help_params(std::ostream& out);
void help_plan(std::ostream& out);
void help_compare(std::ostream& out);
void help_models(std::ostream& out);
void help_validate(std::ostream& out);
void help_completion(std::ostream& out);
// The options each command's help lists (see Command::options).
boost::program_options::options_description options_estimate();
boost::program_options::options_description options_init();
boost::program_options::options_description options_params();
boost::program_options::options_description options_plan();
boost::program_options::options_description options_models();
boost::program_options::options_description options_validate();
boost::program_options::options_description options_hardware();
boost::program_options::options_description options_plugins();
boost::program_options::options_description options_help();
// The man page of `mme` (command null) or of one command, in roff (man(7)), from its help text
// and its options (cmd_completion.cpp).
void write_man_page(std::ostream& out, const Command* command);

}  // namespace mme::cli
