// `mme estimate ARGS` as words, read into an EstimateRequest without the CLI: the rows of a
// real-runs CSV (`mme validate`) carry their estimate as shell words. The option names are
// `mme estimate`'s (the setup schema's flags and the estimate's own), so a row means what the
// same words mean on the command line; tests/cli checks that the two tables agree.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/core.h>

#include <mme/commands/estimate.hpp>
#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/error.hpp>

namespace mme::commands {

namespace {

enum class Takes { kSwitch, kValue, kValues };

// The options of `mme estimate`: name -> what it takes. The setup knobs come from the schema.
const std::map<std::string, Takes, std::less<>>& options() {
  static const std::map<std::string, Takes, std::less<>> table = [] {
    std::map<std::string, Takes, std::less<>> t;
    for (const char* s :
         {"json", "verbose", "breakdown", "dump-config", "print-megatron-args", "v", "quiet", "assume-gpt-entry"})
      t[s] = Takes::kSwitch;
    for (const char* v : {"fit-on", "headroom", "overhead-per-gpu", "html", "svg", "gpu", "revision", "megatron-args",
                          "megatron-args-file", "config", "log-level"})
      t[v] = Takes::kValue;
    for (const char* v : {"hardware-file", "plugin-dir", "set", "script-arg", "script-source", "extra-megatron-flag"})
      t[v] = Takes::kValues;
    for (const SetupKnob* k : setup_knobs_in_flag_order()) {
      switch (k->kind) {
        case KnobKind::kBool:
          if (k->flag) t[k->flag] = Takes::kSwitch;
          if (k->off_flag) t[k->off_flag] = Takes::kSwitch;
          break;
        case KnobKind::kEnv: t[k->flag] = Takes::kValues; break;
        default:
          t[k->flag] = Takes::kValue;
          for (const char* a : k->aliases) t[a] = Takes::kValue;
          for (const auto& sw : k->switches) t[sw.flag] = Takes::kSwitch;
      }
    }
    return t;
  }();
  return table;
}

// The setup schema's flags (the rest are the estimate's own).
bool is_setup_flag(std::string_view name) {
  static const std::set<std::string, std::less<>> own = {"json",
                                                         "verbose",
                                                         "breakdown",
                                                         "dump-config",
                                                         "print-megatron-args",
                                                         "v",
                                                         "quiet",
                                                         "fit-on",
                                                         "headroom",
                                                         "overhead-per-gpu",
                                                         "html",
                                                         "svg",
                                                         "gpu",
                                                         "revision",
                                                         "megatron-args",
                                                         "megatron-args-file",
                                                         "config",
                                                         "log-level",
                                                         "hardware-file",
                                                         "plugin-dir",
                                                         "set",
                                                         "script-arg",
                                                         "script-source",
                                                         "extra-megatron-flag",
                                                         "assume-gpt-entry"};
  return !own.count(name);
}

[[noreturn]] void unknown(const std::string& given) {
  // As the CLI words it (cli/options.cpp): the closest name, or the help hint.
  std::string word = given.substr(std::min(given.find_first_not_of('-'), given.size()));
  word = word.substr(0, word.find('='));
  std::vector<std::string> names;
  for (const auto& [name, takes] : options()) names.push_back(name);
  std::string suggestion;
  if (word.size() <= 2) {
    for (const auto& n : names)
      if (n == word) suggestion = n;
  } else {
    suggestion = closest_name(word, names);
  }
  const std::string shown = given.substr(0, given.find('='));
  if (!suggestion.empty()) throw UsageError(fmt::format("unknown option {}; did you mean --{}?", shown, suggestion));
  throw UsageError(fmt::format("unknown option {} (`mme help estimate` lists the options)", shown));
}

}  // namespace

std::vector<std::string> estimate_word_options() {
  std::vector<std::string> out;
  for (const auto& [name, takes] : options()) out.push_back(name);
  return out;
}

EstimateRequest estimate_request_from_words(const std::vector<std::string>& words) {
  std::map<std::string, std::vector<std::string>, std::less<>> given;  // value options
  std::set<std::string, std::less<>> switches;
  std::vector<std::string> order;  // the setup flags in the order given
  std::optional<std::string> model;
  bool positional_only = false;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (positional_only || w.empty() || w.front() != '-' || w == "-") {
      if (model) throw UsageError("too many positional options have been specified on the command line");
      model = w;
      continue;
    }
    if (w == "--") {
      positional_only = true;
      continue;
    }
    std::string name;
    std::optional<std::string> value;
    if (w.rfind("--", 0) == 0) {
      const auto eq = w.find('=');
      name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) value = w.substr(eq + 1);
    } else if (w == "-v") {
      name = "v";
    } else if (w == "-q") {
      name = "quiet";
    } else {
      unknown(w);
    }
    const auto it = options().find(name);
    if (it == options().end()) unknown(w);
    if (it->second == Takes::kSwitch) {
      if (value) throw UsageError(fmt::format("option '--{}' does not take any arguments", name));
      switches.insert(name);
      if (is_setup_flag(name)) order.push_back(name);
      continue;
    }
    if (!value) {
      if (i + 1 >= words.size())
        throw UsageError(fmt::format("the required argument for option '--{}' is missing", name));
      value = words[++i];
    }
    auto& values = given[name];
    if (it->second == Takes::kValue && !values.empty())
      throw UsageError(fmt::format("option '--{}' cannot be specified more than once", name));
    values.push_back(*value);
    if (is_setup_flag(name) && values.size() == 1) order.push_back(name);
  }
  for (const char* refused : {"html", "svg", "hardware-file", "plugin-dir"})
    if (given.count(refused))
      throw UsageError(fmt::format("--{} is not allowed here (give it to `mme validate` itself, or drop it)", refused));
  for (const char* refused : {"dump-config", "print-megatron-args"})
    if (switches.count(refused))
      throw UsageError(fmt::format("--{} is not allowed here: it replaces the estimate", refused));

  EstimateRequest r;
  auto one = [&](const char* name) -> std::optional<std::string> {
    const auto it = given.find(name);
    return it == given.end() ? std::nullopt : std::optional<std::string>(it->second.front());
  };
  if (const auto v = one("headroom")) r.fit.headroom = parse_headroom(*v);
  if (const auto v = one("fit-on")) r.fit.on_bound = parse_fit_on(*v);
  if (const auto v = one("overhead-per-gpu")) r.fit.reserved = parse_overhead_per_gpu(*v);
  r.input.model = model;
  r.input.megatron_args = one("megatron-args");
  r.input.megatron_args_file = one("megatron-args-file");
  r.input.spec_file = one("config");
  r.input.revision = one("revision").value_or("");
  auto all = [&](const char* name) {
    const auto it = given.find(name);
    return it == given.end() ? std::vector<std::string>{} : it->second;
  };
  r.input.script.set = all("set");
  r.input.script.args = all("script-arg");
  r.input.script.sources = all("script-source");
  r.input.script.extra_flags = all("extra-megatron-flag");
  r.input.script.assume_gpt_entry = switches.count("assume-gpt-entry") > 0;
  r.gpu = one("gpu");
  for (const auto& name : order) {
    const Takes takes = options().at(name);
    if (takes == Takes::kSwitch)
      r.setup.set_switch(name);
    else if (takes == Takes::kValues)
      for (const auto& v : given[name]) r.setup.add(name, v);
    else
      r.setup.set(name, given[name].front());
  }
  return r;
}

}  // namespace mme::commands
