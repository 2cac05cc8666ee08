// Config adapter "nemotron_h": NVIDIA's Nemotron-H family (transformers NemotronHConfig, model_type
// nemotron_h) in Megatron-LM's terms: a hybrid model whose hybrid_override_pattern names each layer,
// 'M' a Mamba-2 layer, '*' an attention layer, '-' an MLP layer and 'E' a mixture-of-experts layer
// (Megatron-LM's --hybrid-layer-pattern, the same symbols), without position embeddings, its MLPs
// and experts with squared ReLU.
#pragma once

#include <mme/sdk/config_adapter.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class NemotronHAdapter final : public ConfigAdapter {
 public:
  std::string_view name() const override { return "nemotron_h"; }
  std::string_view description() const override {
    return "Nemotron-H hybrids (Mamba-2, attention, squared-ReLU MLP or MoE layers by hybrid_override_pattern)";
  }
  std::vector<std::string> model_types() const override { return {"nemotron_h"}; }
  // 100 for model_type nemotron_h, else 0.
  int match(const nlohmann::json& config) const override;
  ModelSpec adapt(const ConfigInput& input) const override;
};

void register_nemotron_h_adapter(Registrar& registry);

}  // namespace mme::plugins
