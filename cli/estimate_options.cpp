#include "estimate_options.hpp"

#include <mme/inputs/setup_schema.hpp>

namespace mme::cli {

// Every flag comes from the setup schema (framework/src/inputs/setup_schema.cpp), in its flag order.
void add_setup_options(po::options_description& visible, po::options_description& hidden) {
  for (const SetupKnob* k : setup_knobs_in_flag_order()) {
    switch (k->kind) {
      case KnobKind::kBool:
        if (k->flag) visible.add_options()(k->flag, po::bool_switch(), k->help);
        if (k->off_flag) visible.add_options()(k->off_flag, po::bool_switch(), k->off_help);
        break;
      case KnobKind::kEnv:
        visible.add_options()(k->flag, po::value<std::vector<std::string>>()->composing()->value_name(k->doc_value),
                              k->help);
        break;
      default: {
        // An enum knob's values are its flag's completions (mme completion); the value is
        // named as in docs/cli.md ("--tp N").
        po::typed_value<std::string>* value = k->kind == KnobKind::kEnum && !k->values.empty()
                                                  ? choice_value({k->values.begin(), k->values.end()})
                                                  : po::value<std::string>();
        if (*k->doc_value) value->value_name(k->doc_value);
        visible.add_options()(k->flag, value, k->help);
        for (const char* a : k->aliases) hidden.add_options()(a, po::value<std::string>(), "");
        for (const auto& sw : k->switches) visible.add_options()(sw.flag, po::bool_switch(), sw.help);
      }
    }
  }
}

po::options_description model_and_setup_hidden_options() {
  po::options_description visible, hidden;
  add_setup_options(visible, hidden);
  hidden.add_options()("model", po::value<std::string>(), "");
  return hidden;
}

}  // namespace mme::cli
