#include <iostream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <mme/engine/estimator.hpp>
#include <mme/inputs/json_schema.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/units.hpp>

#include "command.hpp"
#include "context.hpp"

namespace mme::cli {

namespace {
po::options_description visible_options() {
  po::options_description d("Options");
  d.add_options()("json", po::bool_switch(), "one JSON document on stdout")(
      "verbose", po::bool_switch(), "also list under each model what its config sets that is not modelled");
  d.add(common_options());
  return d;
}
}  // namespace

void help_models(std::ostream& out) {
  out << "Usage: mme models [--json] [--verbose]\n\n"
         "Lists the bundled model configs (share/mme/models, or $MME_MODELS_PATH) with family,\n"
         "adapter and total/active parameter counts. Any of them works offline as MODEL.\n"
         "What a config sets that mme does not model is said by --verbose (and by the estimate\n"
         "of that model), not on every listing.\n\n"
      << visible_options();
}

int run_models(const std::vector<std::string>& args) {
  const auto vm = parse("models", args, visible_options(), {}, {});
  Registry registry;
  load_registry(registry, read_common(vm));
  const bool json = vm["json"].as<bool>();
  const bool verbose = vm["verbose"].as<bool>();
  std::vector<std::string> with_warnings;
  nlohmann::json list = nlohmann::json::array();
  if (!json)
    std::cout << fmt::format("{:<38} {:<14} {:<16} {:>10} {:>10}\n", "MODEL", "FAMILY", "ADAPTER", "TOTAL", "ACTIVE");
  for (const auto& b : list_bundled_models(default_zoo_dirs())) {
    try {
      const ModelSpec model = adapt_config(read_config_file(b.path), b.name, b.path.string(), registry, false);
      const Estimator estimator(model, registry);
      const auto pc = estimator.count_parameters();
      if (json) {
        list.push_back({{"name", b.name},
                        {"family", model.family},
                        {"model_type", model.model_type},
                        {"adapter", model.adapter},
                        {"path", b.path.string()},
                        {"total_params", pc.total},
                        {"active_params", pc.active},
                        {"mtp_params", pc.mtp},
                        {"warnings", model.warnings}});
      } else {
        std::cout << fmt::format("{:<38} {:<14} {:<16} {:>10} {:>10}\n", printable(b.name), model.family, model.adapter,
                                 format_count(pc.total), format_count(pc.active));
        if (verbose)
          for (const auto& w : model.warnings) std::cout << "    note: " << w << "\n";
        else if (!model.warnings.empty())
          with_warnings.push_back(printable(b.name));
      }
    } catch (const Error& e) {
      spdlog::warn("bundled model {}: {}", b.name, e.what());
    }
  }
  if (json) std::cout << json_text(nlohmann::json{{"schema_version", kSchemaVersion}, {"models", list}}, 2) << "\n";
  if (!with_warnings.empty()) {
    std::string names;
    for (const auto& n : with_warnings) names += (names.empty() ? "" : ", ") + n;
    std::cout << fmt::format("\nSome settings of {} are not modelled: `mme models --verbose` lists them.\n", names);
  }
  return 0;
}

po::options_description options_models() { return visible_options(); }

}  // namespace mme::cli
