// What the moonlight_kimi adapter claims and maps: Moonshot AI's DeepSeek-V3-architecture models
// (Moonlight-16B-A3B as model_type deepseek_v3 with Moonshot's vocabulary, Kimi-K2 as kimi_k2),
// through the DeepSeek mapping, so the counts are the deepseek adapter's. Configs are adapted as
// the CLI does (best adapter of the full registry, tests/support/adapters); the expected values
// are the bundled configs' keys.
#include <gtest/gtest.h>

#include <mme/engine/estimator.hpp>

#include "expected_params.hpp"
#include "test_registry.hpp"

namespace mme::test {
namespace {

TEST(MoonlightKimiAdapter, KimiK2) {
  const ModelSpec s = adapt(bundled_json("moonshotai/Kimi-K2-Instruct"));
  EXPECT_EQ(s.adapter, "moonlight_kimi");
  EXPECT_EQ(s.family, "kimi_k2");
  ASSERT_EQ(s.layers.size(), 61u);
  EXPECT_EQ(s.vocab_size, 163840);
  EXPECT_EQ(s.mtp_num_layers, 0);        // num_nextn_predict_layers 0
  const LayerSpec& dense = s.layers[0];  // first_k_dense_replace 1
  EXPECT_EQ(dense.mlp.kind, "dense");
  EXPECT_EQ(dense.mlp.ffn_hidden_size, 18432);
  const LayerSpec& moe = s.layers[1];
  EXPECT_EQ(moe.attention.kind, "mla");
  EXPECT_EQ(moe.attention.q_lora_rank, std::optional<std::int64_t>(1536));
  EXPECT_EQ(moe.attention.kv_lora_rank, 512);
  EXPECT_EQ(moe.mlp.kind, "moe");
  EXPECT_EQ(moe.mlp.num_experts, 384);
  EXPECT_EQ(moe.mlp.top_k, 8);
  EXPECT_EQ(moe.mlp.expert_ffn_hidden_size, 2048);
  EXPECT_EQ(moe.mlp.shared_expert_ffn_hidden_size, 2048);  // 1 shared x 2048
  EXPECT_TRUE(moe.mlp.router_expert_bias);                 // noaux_tc, as DeepSeek-V3
}

TEST(MoonlightKimiAdapter, AMoonshotVocabularyOnADeepSeekV3ConfigIsMoonlight) {
  auto config = bundled_json("moonshotai/Kimi-K2-Instruct");
  config["model_type"] = "deepseek_v3";
  const ModelSpec spec = adapt(config);
  EXPECT_EQ(spec.adapter, "moonlight_kimi");
  EXPECT_EQ(spec.family, "moonlight");
  config["vocab_size"] = 129280;
  EXPECT_EQ(adapt(config).adapter, "deepseek");
}

std::pair<std::int64_t, std::int64_t> counts(const std::string& model, const Registry& r, std::string* adapter) {
  const ModelSpec spec = adapt(bundled_json(model), "config.json", r);
  *adapter = spec.adapter;
  const auto pc = Estimator(spec, r).count_parameters();
  return {pc.total, pc.active};
}

TEST(MoonlightKimiAdapter, MoonshotModelsCountTheSameWhicheverAdapterClaimsThem) {
  const auto without_moonshot = make_registry({"deepseek", "qwen", "generic_hf"});
  for (const auto& e : expected_params()) {
    if (e.model.rfind("moonshotai/", 0) != 0) continue;
    std::string with_adapter, without_adapter;
    const auto with = counts(e.model, full_registry(), &with_adapter);
    const auto without = counts(e.model, *without_moonshot, &without_adapter);
    EXPECT_EQ(with_adapter, "moonlight_kimi") << e.model;
    EXPECT_EQ(without_adapter, "deepseek") << e.model;  // Moonlight by model_type, Kimi by architecture
    EXPECT_EQ(with, without) << e.model;
    EXPECT_EQ(with.first, e.total) << e.model;
    EXPECT_EQ(with.second, e.active) << e.model;
  }
}

}  // namespace
}  // namespace mme::test
