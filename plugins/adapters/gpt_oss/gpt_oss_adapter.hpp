// Config adapter "gpt_oss": OpenAI's GPT-OSS (transformers GptOssConfig, model_type gpt_oss) in
// Megatron-LM's terms. Every layer is a mixture of experts; attention alternates between a sliding
// window and the full sequence (layer_types) and adds a learnable per-head offset to the softmax's
// denominator (the attention sinks); the experts run a clamped quick-GEGLU with biases.
#pragma once

#include <mme/sdk/config_adapter.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class GptOssAdapter final : public ConfigAdapter {
 public:
  std::string_view name() const override { return "gpt_oss"; }
  std::string_view description() const override {
    return "GPT-OSS (sliding-window and full attention with learnable sinks, clamped quick-GEGLU experts with biases)";
  }
  std::vector<std::string> model_types() const override { return {"gpt_oss"}; }
  // 100 for model_type gpt_oss, else 0.
  int match(const nlohmann::json& config) const override;
  ModelSpec adapt(const ConfigInput& input) const override;
};

void register_gpt_oss_adapter(Registrar& registry);

}  // namespace mme::plugins
