// Config adapter for ACME's "acme_lm" models (fictional): a decoder-only transformer whose
// config.json uses its own key names (d_model, n_layers, n_heads, ...), so no built-in adapter
// can read it. Every `moe_every`-th layer is a mixture of experts.
#pragma once

#include <mme/sdk/config_adapter.hpp>

namespace acme {

class AcmeLmAdapter final : public mme::ConfigAdapter {
 public:
  std::string_view name() const override { return "acme_lm"; }
  std::string_view description() const override { return "ACME LM configs (model_type acme_lm)"; }
  std::vector<std::string> model_types() const override { return {"acme_lm"}; }
  // 100 (a family's own model_type) for model_type "acme_lm", else 0.
  int match(const nlohmann::json& config) const override;
  // Throws mme::ConfigError naming the file and the key on bad input.
  mme::ModelSpec adapt(const mme::ConfigInput& input) const override;
};

}  // namespace acme
