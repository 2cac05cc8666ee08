// Command-line helpers shared by the subcommands: common options (plugin folders, logging),
// strict number parsing with messages that name the flag, and flag aliases.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include <mme/inputs/setup_schema.hpp>

namespace mme::cli {

namespace po = boost::program_options;

// What a flag's value is, for the shell completion and the man pages (cmd_completion.cpp): a
// value kind the option tables record where they define the flag. A flag whose semantic is
// not one of these takes free text.
enum class ValueKind { kText, kChoice, kFile, kDirectory };
class ValueHint {
 public:
  virtual ~ValueHint() = default;
  ValueKind kind = ValueKind::kText;
  std::vector<std::string> choices;  // kChoice: the values, in the order listed
};
template <class T>
class HintedValue final : public po::typed_value<T>, public ValueHint {
 public:
  HintedValue(ValueKind k, std::vector<std::string> values) : po::typed_value<T>(nullptr) {
    kind = k;
    choices = std::move(values);
  }
};
// A flag taking one of `choices` (the check of the value stays where it is read).
po::typed_value<std::string>* choice_value(std::vector<std::string> choices);
// A flag taking a file (value name FILE) or a folder (DIR); `repeatable` ones compose.
po::typed_value<std::string>* file_value();
po::typed_value<std::vector<std::string>>* files_value();
po::typed_value<std::vector<std::string>>* directories_value();
// The hint of an option (nullptr: free text, or a switch).
const ValueHint* value_hint(const po::option_description& option);

// The levels --log-level takes.
const std::vector<std::string>& log_levels();

// --plugin-dir (repeatable), --log-level, -v, -q.
po::options_description common_options();

struct CommonSettings {
  std::vector<std::filesystem::path> plugin_dirs;
  std::string log_level = "warn";
};
CommonSettings read_common(const po::variables_map& vm);

// Parses argv of `mme COMMAND` with the given options and positionals; unknown flags and bad
// values become UsageError with the flag named; an unknown flag close to a known one (visible
// or hidden) is suggested: "unknown option --tpp; did you mean --tp?".
// At most kMaxArguments arguments (UsageError beyond).
inline constexpr std::size_t kMaxArguments = 4096;
po::variables_map parse(const std::string& command, const std::vector<std::string>& args,
                        const po::options_description& visible, const po::options_description& hidden,
                        const po::positional_options_description& positional);

// The message of an unknown flag GIVEN (as typed: "--tpp", "-tp", "--tpp=4") among OPTIONS.
std::string unknown_option_message(const std::string& command, const std::string& given,
                                   const po::options_description& options);

// Strict conversions: the whole string must be a number in range (integers: mme::parse_int of
// the setup schema, mme/inputs/setup_schema.hpp).
using mme::parse_int;
double parse_double(const std::string& flag, const std::string& text, double min, double max);

// The value of an option given under one of several names (aliases); UsageError if two
// names are given with different values.
std::optional<std::string> get_aliased(const po::variables_map& vm, const std::vector<const char*>& names);
inline std::optional<std::string> get_aliased(const po::variables_map& vm, std::initializer_list<const char*> names) {
  return get_aliased(vm, std::vector<const char*>(names));
}

}  // namespace mme::cli
