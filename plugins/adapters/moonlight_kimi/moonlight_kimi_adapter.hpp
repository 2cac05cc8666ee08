// Config adapter "moonlight_kimi": Moonshot AI's models built on the DeepSeek-V3
// architecture (DeepseekV3ForCausalLM):
//  - Kimi-K2 ships model_type kimi_k2, which no other adapter knows;
//  - Moonlight-16B-A3B ships model_type deepseek_v3, so the deepseek adapter would take it
//    too. This adapter claims it explicitly (score 200 > deepseek's 100) when a deepseek_v3
//    config carries Moonshot's tokenizer vocabulary (vocab_size 163840), so `mme` reports
//    the family as "moonlight". The mapping is the shared DeepSeek one either way, so the
//    numbers are the same whichever adapter is loaded.
#pragma once

#include <mme/sdk/config_adapter.hpp>
#include <mme/sdk/registrar.hpp>

namespace mme::plugins {

class MoonlightKimiAdapter final : public ConfigAdapter {
 public:
  // Moonshot's tiktoken vocabulary (Moonlight, Kimi-K2); DeepSeek's own models use 102400
  // (V2) and 129280 (V3).
  static constexpr std::int64_t kMoonshotVocabSize = 163840;

  std::string_view name() const override { return "moonlight_kimi"; }
  std::string_view description() const override {
    return "Moonshot AI Moonlight-16B-A3B and Kimi-K2 (DeepSeek-V3 architecture, Moonshot vocabulary)";
  }
  std::vector<std::string> model_types() const override { return {"kimi_k2", "deepseek_v3"}; }
  // 200 for a deepseek_v3 config with the Moonshot vocabulary (Moonlight); 100 for
  // model_type kimi_k2; else 0.
  int match(const nlohmann::json& config) const override;
  ModelSpec adapt(const ConfigInput& input) const override;
};

void register_moonlight_kimi_adapter(Registrar& registry);

}  // namespace mme::plugins
