#include "deepseek_adapter.hpp"

#include "deepseek_mapping.hpp"
#include "hf_common.hpp"

namespace mme::plugins {

namespace {

constexpr int kOwnModelType = 100;
constexpr int kArchitectureOnly = 50;

}  // namespace

int DeepSeekAdapter::match(const nlohmann::json& config) const {
  const std::string type = hf::model_type(config);
  if (type == "deepseek_v2" || type == "deepseek_v3") return kOwnModelType;
  if (hf::has_architecture(config, "DeepseekV3ForCausalLM") || hf::has_architecture(config, "DeepseekV2ForCausalLM"))
    return kArchitectureOnly;
  return 0;
}

ModelSpec DeepSeekAdapter::adapt(const ConfigInput& input) const {
  const std::string type = hf::model_type(input.config);
  // The lineage decides the defaults of keys a config may omit (topk_method, router dtype).
  bool v3 = type == "deepseek_v3";
  if (type != "deepseek_v2" && type != "deepseek_v3") v3 = !hf::has_architecture(input.config, "DeepseekV2ForCausalLM");
  deepseek::DeepSeekStyle style;
  style.family = v3 ? "deepseek_v3" : "deepseek_v2";
  style.adapter = name();
  style.v3 = v3;
  return deepseek::map_deepseek_config(input, style);
}

void register_deepseek_adapter(Registrar& registry) { registry.add_adapter(std::make_shared<DeepSeekAdapter>()); }

}  // namespace mme::plugins
