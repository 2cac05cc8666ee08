#include "test_registry.hpp"

#include <functional>
#include <stdexcept>

#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>

#include "deepseek_adapter.hpp"
#include "expected_params.hpp"
#include "generic_hf_adapter.hpp"
#include "layer_plugins.hpp"
#include "moonlight_kimi_adapter.hpp"
#include "qwen_adapter.hpp"

namespace mme::test {

namespace {

void add(Registry& r, const std::string& name, const std::function<void(Registrar&)>& fn) {
  if (!r.register_plugin(name, "test", "", fn)) throw std::runtime_error("registering " + name + " failed");
}

}  // namespace

const std::vector<std::string>& all_adapter_names() {
  static const std::vector<std::string> names = {"deepseek", "moonlight_kimi", "qwen", "generic_hf"};
  return names;
}

std::unique_ptr<Registry> make_registry(const std::vector<std::string>& adapters) {
  auto r = std::make_unique<Registry>();
  test::register_layer_plugins(*r);
  for (const auto& a : adapters) {
    if (a == "deepseek")
      add(*r, "adapter_deepseek", plugins::register_deepseek_adapter);
    else if (a == "moonlight_kimi")
      add(*r, "adapter_moonlight_kimi", plugins::register_moonlight_kimi_adapter);
    else if (a == "qwen")
      add(*r, "adapter_qwen", plugins::register_qwen_adapter);
    else if (a == "generic_hf")
      add(*r, "adapter_generic_hf", plugins::register_generic_hf_adapter);
    else
      throw std::runtime_error("unknown adapter " + a);
  }
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
