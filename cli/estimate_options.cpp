#include "estimate_options.hpp"

#include <string_view>
#include <vector>

#include <fmt/core.h>

#include <mme/inputs/setup_schema.hpp>
#include <mme/sdk/error.hpp>

namespace mme::cli {

namespace {

// The parsed command line as the setup schema asks for it.
class VmFlags final : public MmeFlags {
 public:
  explicit VmFlags(const po::variables_map& vm) : vm_(vm) {}
  std::optional<std::string> value(std::string_view name) const override {
    const std::string n(name);
    if (!vm_.count(n)) return std::nullopt;
    return vm_[n].as<std::string>();
  }
  bool on(std::string_view name) const override {
    const std::string n(name);
    return vm_.count(n) && vm_[n].as<bool>();
  }
  std::vector<std::string> values(std::string_view name) const override {
    const std::string n(name);
    if (!vm_.count(n)) return {};
    return vm_[n].as<std::vector<std::string>>();
  }

 private:
  const po::variables_map& vm_;
};

}  // namespace

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

bool setup_flag_given(const po::variables_map& vm, const std::string& name) {
  for (const auto& k : setup_knobs()) {
    if (k.kind == KnobKind::kBool || k.kind == KnobKind::kEnv || !k.flag || name != k.flag) continue;
    if (vm.count(k.flag)) return true;
    for (const char* a : k.aliases)
      if (vm.count(a)) return true;
    return false;
  }
  return vm.count(name) > 0;
}

TrainingSetup read_setup(const po::variables_map& vm, TrainingSetup s) { return setup_from_mme_flags(VmFlags(vm), s); }

po::options_description model_and_setup_hidden_options() {
  po::options_description visible, hidden;
  add_setup_options(visible, hidden);
  hidden.add_options()("model", po::value<std::string>(), "");
  return hidden;
}

double parse_headroom(const std::string& text) {
  std::string t = text;
  double scale = 1.0;
  if (!t.empty() && t.back() == '%') {
    t.pop_back();
    scale = 0.01;
  }
  return parse_double("--headroom", t, 0.0, scale == 1.0 ? 0.9 : 90.0) * scale;
}

}  // namespace mme::cli
