// Config adapter "megatron_args": builds the model from Megatron-LM launch flags
// (megatron/training/arguments.py), applying Megatron-LM's own defaults for every flag not
// given: ffn 4h (SwiGLU: 8h/3 rounded down to 64), LayerNorm, GELU, learned absolute
// positions, biases on, dropout 0.1, GPT-2 BPE vocabulary (50257), tied embeddings.
#pragma once

#include <mme/sdk/config_adapter.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class MegatronArgsAdapter final : public ConfigAdapter {
 public:
  std::string_view name() const override { return "megatron_args"; }
  std::string_view description() const override {
    return "Megatron-LM launch flags (--megatron-args / --megatron-args-file, ground-truth CSV rows)";
  }
  std::vector<std::string> model_types() const override { return {"megatron-args"}; }
  int match(const nlohmann::json& config) const override;
  ModelSpec adapt(const ConfigInput& input) const override;
};

void register_megatron_args(Registrar& registry);

}  // namespace mme::plugins
