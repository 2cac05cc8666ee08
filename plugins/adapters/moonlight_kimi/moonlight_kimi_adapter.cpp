#include "moonlight_kimi_adapter.hpp"

#include "deepseek_mapping.hpp"
#include "hf_common.hpp"

namespace mme::plugins {

namespace {

constexpr int kOwnModelType = 100;
constexpr int kBeatsFamilyAdapter = 200;

bool has_moonshot_vocab(const nlohmann::json& config) {
  auto it = config.find("vocab_size");
  return it != config.end() && it->is_number_integer() &&
         it->get<std::int64_t>() == MoonlightKimiAdapter::kMoonshotVocabSize;
}

}  // namespace

int MoonlightKimiAdapter::match(const nlohmann::json& config) const {
  const std::string type = hf::model_type(config);
  if (type == "kimi_k2") return kOwnModelType;
  if (type == "deepseek_v3" && has_moonshot_vocab(config)) return kBeatsFamilyAdapter;
  return 0;
}

ModelSpec MoonlightKimiAdapter::adapt(const ConfigInput& input) const {
  deepseek::DeepSeekStyle style;
  style.family = hf::model_type(input.config) == "kimi_k2" ? "kimi_k2" : "moonlight";
  style.adapter = name();
  // Both are DeepSeek-V3 lineage: noaux_tc routing with expert bias, fp32 router
  // (Megatron-Bridge kimi_bridge.py mirrors deepseek_v3_bridge.py).
  style.v3 = true;
  return deepseek::map_deepseek_config(input, style);
}

void register_moonlight_kimi_adapter(Registrar& registry) {
  registry.add_adapter(std::make_shared<MoonlightKimiAdapter>());
}

}  // namespace mme::plugins
