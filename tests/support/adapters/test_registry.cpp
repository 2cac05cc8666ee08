#include "test_registry.hpp"

#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>

#include "builtin_plugins.hpp"
#include "expected_params.hpp"
#include "layer_plugins.hpp"

namespace mme::test {

const std::vector<std::string>& all_adapter_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const std::string& plugin : builtin_plugin_names("adapter_")) out.push_back(plugin.substr(8));
    return out;
  }();
  return names;
}

std::unique_ptr<Registry> make_registry(const std::vector<std::string>& adapters) {
  auto r = std::make_unique<Registry>();
  test::register_layer_plugins(*r);
  for (const auto& a : adapters) register_builtin_plugin(*r, "adapter_" + a);
  return r;
}

const Registry& full_registry() {
  static const std::unique_ptr<Registry> r = make_registry();
  return *r;
}

nlohmann::json bundled_json(const std::string& model) { return read_config_file(bundled_config(model)); }

ModelSpec adapt(const nlohmann::json& config, const std::string& source, const Registry& registry) {
  return adapt_config(config, "test/model", source, registry);
}

}  // namespace mme::test
