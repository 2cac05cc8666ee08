#include "options.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/core.h>

#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/number_text.hpp>

namespace mme::cli {

po::typed_value<std::string>* choice_value(std::vector<std::string> choices) {
  return new HintedValue<std::string>(ValueKind::kChoice, std::move(choices));
}

po::typed_value<std::string>* file_value() {
  return (new HintedValue<std::string>(ValueKind::kFile, {}))->value_name("FILE");
}

po::typed_value<std::vector<std::string>>* files_value() {
  return (new HintedValue<std::vector<std::string>>(ValueKind::kFile, {}))->composing()->value_name("FILE");
}

po::typed_value<std::vector<std::string>>* directories_value() {
  return (new HintedValue<std::vector<std::string>>(ValueKind::kDirectory, {}))->composing()->value_name("DIR");
}

const ValueHint* value_hint(const po::option_description& option) {
  return dynamic_cast<const ValueHint*>(option.semantic().get());
}

const std::vector<std::string>& log_levels() {
  static const std::vector<std::string> levels = {"trace", "debug", "info",     "warn", "warning",
                                                  "error", "err",   "critical", "off"};
  return levels;
}

po::options_description common_options() {
  po::options_description d("Common options");
  d.add_options()("plugin-dir", directories_value(),
                  "load plugins from DIR first (repeatable); then MME_PLUGIN_PATH, then <exe>/../lib/mme/plugins")(
      "log-level", choice_value({"trace", "debug", "info", "warn", "error", "off"}),
      "stderr log level: trace, debug, info, warn (default), error, off")(
      "v,v", po::bool_switch(), "same as --log-level debug (-v; --v is accepted too)")("quiet,q", po::bool_switch(),
                                                                                       "same as --log-level error");
  return d;
}

CommonSettings read_common(const po::variables_map& vm) {
  CommonSettings s;
  if (vm.count("plugin-dir"))
    for (const auto& d : vm["plugin-dir"].as<std::vector<std::string>>()) s.plugin_dirs.emplace_back(d);
  if (vm.count("v") && vm["v"].as<bool>()) s.log_level = "debug";
  if (vm.count("quiet") && vm["quiet"].as<bool>()) s.log_level = "error";
  if (vm.count("log-level")) {
    s.log_level = vm["log-level"].as<std::string>();
    bool ok = false;
    for (const auto& l : log_levels()) ok = ok || s.log_level == l;
    if (!ok)
      throw UsageError(
          fmt::format("--log-level: unknown level '{}' (trace, debug, info, warn, error, off)", s.log_level));
    if (s.log_level == "warning") s.log_level = "warn";
    if (s.log_level == "error") s.log_level = "err";
  } else if (s.log_level == "error") {
    s.log_level = "err";
  }
  return s;
}

namespace {
std::string lower_case(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

std::string unknown_option_message(const std::string& command, const std::string& given,
                                   const po::options_description& options) {
  // The word as typed, without its dashes and any "=value": "-tp" and "--tp=4" are "tp".
  std::string word = given.substr(std::min(given.find_first_not_of('-'), given.size()));
  word = word.substr(0, word.find('='));
  std::vector<std::string> names;
  for (const auto& o : options.options()) {
    const std::string& n = o->long_name();
    if (!n.empty() && n != "model") names.push_back(n);  // MODEL is the positional argument, not a flag
  }
  std::string suggestion;
  if (word.size() <= 2) {
    // One or two letters are close to every short flag: suggest only the same name with two
    // dashes ("-tp" for "--tp").
    for (const auto& n : names)
      if (lower_case(n) == lower_case(word)) suggestion = n;
  } else {
    suggestion = closest_name(word, names);
  }
  const std::string shown = given.substr(0, given.find('='));
  if (!suggestion.empty()) return fmt::format("unknown option {}; did you mean --{}?", shown, suggestion);
  if (command.empty()) return fmt::format("unknown option {}", shown);
  return fmt::format("unknown option {} (`mme help {}` lists the options)", shown, command);
}

po::variables_map parse(const std::string& command, const std::vector<std::string>& args,
                        const po::options_description& visible, const po::options_description& hidden,
                        const po::positional_options_description& positional) {
  po::options_description all;
  all.add(visible).add(hidden);
  po::variables_map vm;
  try {
    auto parsed = po::command_line_parser(args)
                      .options(all)
                      .positional(positional)
                      .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
                      .run();
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::unknown_option& e) {
    // Built here, not by Boost: its message template would also loop on a '%' token in the
    // name (below).
    throw UsageError(unknown_option_message(command, e.get_option_name(), all));
  } catch (const po::error_with_option_name& e) {
    // Boost fills its message template by replacing %canonical_option%, %value%, ... in a loop
    // until none is left, so an argument that itself holds such a token ('--x%value%') never
    // ends (found by the cli_args fuzzer). With a '%' in any argument the message is built here.
    if (std::none_of(args.begin(), args.end(), [](const std::string& a) { return a.find('%') != std::string::npos; }))
      throw UsageError(e.what());
    throw UsageError(fmt::format("invalid use of option '{}' or its value", e.get_option_name()));
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return vm;
}

double parse_double(const std::string& flag, const std::string& text, double min, double max) {
  const auto parsed = parse_decimal(text);  // the same under every locale (number_text.hpp)
  if (!parsed || !std::isfinite(*parsed)) throw UsageError(fmt::format("{}: expected a number, got '{}'", flag, text));
  const double v = *parsed;
  if (v < min || v > max) throw UsageError(fmt::format("{}: {} is out of range [{}, {}]", flag, text, min, max));
  return v;
}

std::optional<std::string> get_aliased(const po::variables_map& vm, const std::vector<const char*>& names) {
  std::optional<std::string> value;
  const char* first = nullptr;
  for (const char* n : names) {
    if (!vm.count(n)) continue;
    const auto& v = vm[n].as<std::string>();
    if (value && *value != v) throw UsageError(fmt::format("--{} {} and --{} {} disagree", first, *value, n, v));
    value = v;
    first = n;
  }
  return value;
}

}  // namespace mme::cli
