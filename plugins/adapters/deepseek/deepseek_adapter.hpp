// Config adapter "deepseek": DeepSeek-V2 / V2-Lite (model_type deepseek_v2) and
// DeepSeek-V3 / R1 (deepseek_v3): multi-latent attention, DeepSeekMoE with shared experts,
// dense first layers, noaux_tc expert bias and multi-token prediction.
#pragma once

#include <mme/sdk/config_adapter.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class DeepSeekAdapter final : public ConfigAdapter {
 public:
  std::string_view name() const override { return "deepseek"; }
  std::string_view description() const override {
    return "DeepSeek-V2/V2-Lite/V3/R1: MLA attention, DeepSeekMoE (shared experts, dense first layers), "
           "noaux_tc expert bias, MTP";
  }
  std::vector<std::string> model_types() const override { return {"deepseek_v2", "deepseek_v3"}; }
  // 100 for model_type deepseek_v2 / deepseek_v3; 50 for a DeepseekV2/V3ForCausalLM
  // architecture under another model_type (a family adapter of its own, such as
  // moonlight_kimi for kimi_k2, scores higher); else 0.
  int match(const nlohmann::json& config) const override;
  ModelSpec adapt(const ConfigInput& input) const override;
};

void register_deepseek_adapter(Registrar& registry);

}  // namespace mme::plugins
