// Config adapter "generic_hf": the fallback for any Hugging Face decoder config with the
// common keys (hidden_size, num_hidden_layers, num_attention_heads, vocab_size), e.g. Llama,
// Mistral, Mixtral, Gemma/Gemma-2, Phi-3. It maps keys with Megatron-Bridge's generic
// "first match wins" table (model_bridge.py CONFIG_MAPPING) plus a few per-family facts that
// configs do not state (Gemma's GeGLU, sandwich norms and tied default), refuses configs
// without the essential keys (naming them), and warns about keys it sees but cannot honour.
#pragma once

#include <mme/sdk/config_adapter.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class GenericHfAdapter final : public ConfigAdapter {
 public:
  std::string_view name() const override { return "generic_hf"; }
  std::string_view description() const override {
    return "fallback for Hugging Face decoder configs with the common keys (Llama, Mistral, Mixtral, Gemma, ...)";
  }
  std::vector<std::string> model_types() const override;
  // 10 (the fallback score) for a JSON object with at least one of the essential keys;
  // adapt() then names whichever are missing. 0 otherwise.
  int match(const nlohmann::json& config) const override;
  ModelSpec adapt(const ConfigInput& input) const override;
};

void register_generic_hf_adapter(Registrar& registry);

}  // namespace mme::plugins
