#include "context.hpp"

#include <cstdlib>

#include <mme/sdk/log.hpp>

#include <unistd.h>

namespace mme::cli {

commands::Context make_context(const po::variables_map& vm, const CommonSettings& settings) {
  init_logging(settings.log_level);
  commands::Context c;
  c.plugins = plugin_source(settings);
  if (vm.count("hardware-file"))
    for (const auto& f : vm["hardware-file"].as<std::vector<std::string>>()) c.hardware_files.emplace_back(f);
  c.environment = commands::Environment::from_process();
  // A download's notice on a stderr terminal, unless -q or a quieter --log-level.
  c.terminal_notices = settings.log_level == "trace" || settings.log_level == "debug" || settings.log_level == "info" ||
                       settings.log_level == "warn";
  c.log_level = settings.log_level;
  return c;
}

void add_hardware_file_option(po::options_description& options) {
  options.add_options()("hardware-file", files_value(),
                        "also load the GPU profiles of this JSON file (repeatable; format in "
                        "docs/plugin-authoring.md)");
}

commands::SetupFlags setup_flags(const po::variables_map& vm) {
  commands::SetupFlags f;
  auto value = [&](const char* name) {
    if (name && vm.count(name)) f.set(name, vm[name].as<std::string>());
  };
  auto on = [&](const char* name) {
    if (name && vm.count(name) && vm[name].as<bool>()) f.set_switch(name);
  };
  for (const SetupKnob* k : setup_knobs_in_flag_order()) {
    switch (k->kind) {
      case KnobKind::kBool:
        on(k->flag);
        on(k->off_flag);
        break;
      case KnobKind::kEnv:
        if (vm.count(k->flag))
          for (const auto& v : vm[k->flag].as<std::vector<std::string>>()) f.add(k->flag, v);
        break;
      default:
        value(k->flag);
        for (const char* a : k->aliases) value(a);
        for (const auto& sw : k->switches) on(sw.flag);
    }
  }
  return f;
}

std::optional<std::string> flag_text(const po::variables_map& vm, const char* name) {
  return vm.count(name) ? std::optional<std::string>(vm[name].as<std::string>()) : std::nullopt;
}

bool switch_on(const po::variables_map& vm, const char* name) { return vm.count(name) && vm[name].as<bool>(); }

std::optional<std::string> model_argument(const po::variables_map& vm) { return flag_text(vm, "model"); }

commands::ModelInput model_input(const po::variables_map& vm, const std::optional<std::string>& model) {
  commands::ModelInput in;
  in.model = model;
  in.megatron_args = flag_text(vm, "megatron-args");
  in.megatron_args_file = flag_text(vm, "megatron-args-file");
  in.spec_file = flag_text(vm, "config");
  in.revision = flag_text(vm, "revision").value_or("");
  // The launch script's reading (cmd_estimate.cpp's options; absent from commands without them).
  auto list = [&vm](const char* name) {
    return vm.count(name) ? vm[name].as<std::vector<std::string>>() : std::vector<std::string>{};
  };
  in.script.set = list("set");
  in.script.args = list("script-arg");
  in.script.sources = list("script-source");
  in.script.extra_flags = list("extra-megatron-flag");
  in.script.assume_gpt_entry = switch_on(vm, "assume-gpt-entry");
  return in;
}

bool stdout_is_tty() { return ::isatty(STDOUT_FILENO) != 0; }

bool colour_allowed() {
  const char* no_colour = std::getenv("NO_COLOR");
  return stdout_is_tty() && (no_colour == nullptr || *no_colour == '\0');
}

}  // namespace mme::cli
