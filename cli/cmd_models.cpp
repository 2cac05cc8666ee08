#include <iostream>

#include <fmt/core.h>

#include <mme/commands/documents.hpp>
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
  const bool json = switch_on(vm, "json");
  const bool verbose = switch_on(vm, "verbose");
  const std::vector<commands::ModelEntry> models = commands::models(make_context(vm, read_common(vm)));
  if (json) {
    std::cout << json_text(commands::models_document(models), 2) << "\n";
    return 0;
  }
  std::vector<std::string> with_warnings;
  std::cout << fmt::format("{:<38} {:<14} {:<16} {:>10} {:>10}\n", "MODEL", "FAMILY", "ADAPTER", "TOTAL", "ACTIVE");
  for (const auto& e : models) {
    const ModelSpec& model = e.model;
    std::cout << fmt::format("{:<38} {:<14} {:<16} {:>10} {:>10}\n", printable(e.bundled.name), model.family,
                             model.adapter, format_count(e.counts.total), format_count(e.counts.active));
    if (verbose)
      for (const auto& w : model.warnings) std::cout << "    note: " << w << "\n";
    else if (!model.warnings.empty())
      with_warnings.push_back(printable(e.bundled.name));
  }
  if (!with_warnings.empty()) {
    std::string names;
    for (const auto& n : with_warnings) names += (names.empty() ? "" : ", ") + n;
    std::cout << fmt::format("\nSome settings of {} are not modelled: `mme models --verbose` lists them.\n", names);
  }
  return 0;
}

po::options_description options_models() { return visible_options(); }

}  // namespace mme::cli
