// Config adapter "qwen": Qwen2 / Qwen2.5 (model_type qwen2: QKV bias), Qwen2-MoE (qwen2_moe:
// shared expert with its sigmoid gate, decoder_sparse_step, mlp_only_layers), Qwen3
// (qwen3: q/k norm, explicit head_dim) and Qwen3-MoE (qwen3_moe).
#pragma once

#include <mme/sdk/config_adapter.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class QwenAdapter final : public ConfigAdapter {
 public:
  std::string_view name() const override { return "qwen"; }
  std::string_view description() const override {
    return "Qwen2/2.5 (QKV bias), Qwen2-MoE (shared expert + gate), Qwen3 and Qwen3-MoE (q/k norm, head_dim)";
  }
  std::vector<std::string> model_types() const override { return {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"}; }
  // 100 for the four model_types above, else 0.
  int match(const nlohmann::json& config) const override;
  ModelSpec adapt(const ConfigInput& input) const override;
};

void register_qwen_adapter(Registrar& registry);

}  // namespace mme::plugins
