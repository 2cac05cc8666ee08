// What the deepseek adapter puts into the ModelSpec: DeepSeek-V2/V3 (MLA, MoE layer frequency, query compression, the
// expert bias), the keys it read and the warnings for keys it cannot honour. Configs are adapted as the CLI does (best
// adapter of the full registry, tests/support/adapters).
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/engine/estimator.hpp>

#include "test_registry.hpp"

namespace mme::test {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(adapter_mapping, DeepSeekV3) {
  const ModelSpec s = adapt(bundled_json("deepseek-ai/DeepSeek-V3"));
  ASSERT_EQ(s.num_layers, 61);
  ASSERT_EQ(s.layers.size(), 61u);
  EXPECT_EQ(s.vocab_size, 129280);  // unpadded
  EXPECT_FALSE(s.tie_embeddings);
  EXPECT_EQ(s.mtp_num_layers, 1);
  for (int i = 0; i < 61; ++i) {
    const auto& l = s.layers[static_cast<std::size_t>(i)];
    EXPECT_EQ(l.attention.kind, "mla");
    EXPECT_EQ(l.attention.q_lora_rank, std::optional<std::int64_t>(1536));
    EXPECT_EQ(l.attention.kv_lora_rank, 512);
    EXPECT_EQ(l.attention.qk_head_dim, 128);
    EXPECT_EQ(l.attention.qk_pos_emb_head_dim, 64);
    EXPECT_EQ(l.attention.v_head_dim, 128);
    EXPECT_TRUE(l.attention.qk_norm);
    if (i < 3) {  // first_k_dense_replace 3: dense layers use intermediate_size
      EXPECT_EQ(l.mlp.kind, "dense") << i;
      EXPECT_EQ(l.mlp.ffn_hidden_size, 18432);
    } else {
      EXPECT_EQ(l.mlp.kind, "moe") << i;
      EXPECT_EQ(l.mlp.num_experts, 256);
      EXPECT_EQ(l.mlp.top_k, 8);
      EXPECT_EQ(l.mlp.expert_ffn_hidden_size, 2048);
      EXPECT_EQ(l.mlp.shared_expert_ffn_hidden_size, 2048);  // 1 shared x 2048
      EXPECT_TRUE(l.mlp.router_expert_bias);                 // noaux_tc
      EXPECT_TRUE(l.mlp.router_fp32);
      EXPECT_FALSE(l.mlp.shared_expert_gate);
    }
  }
  EXPECT_THAT(s.keys_read, Contains("first_k_dense_replace"));
  EXPECT_THAT(s.keys_read, Contains("num_nextn_predict_layers"));
  EXPECT_THAT(s.keys_read, Not(Contains("num_key_value_heads")));  // MLA has no KV heads
}

TEST(adapter_mapping, DeepSeekV2LiteHasNoQueryCompressionNoExpertBias) {
  const ModelSpec s = adapt(bundled_json("deepseek-ai/DeepSeek-V2-Lite"));
  EXPECT_FALSE(s.layers[0].attention.q_lora_rank.has_value());
  EXPECT_EQ(s.layers[0].mlp.kind, "dense");
  EXPECT_EQ(s.layers[0].mlp.ffn_hidden_size, 10944);
  EXPECT_EQ(s.layers[1].mlp.kind, "moe");
  EXPECT_EQ(s.layers[1].mlp.shared_expert_ffn_hidden_size, 2 * 1408);
  EXPECT_FALSE(s.layers[1].mlp.router_expert_bias);  // topk_method greedy
  EXPECT_FALSE(s.layers[1].mlp.router_fp32);
  EXPECT_EQ(s.mtp_num_layers, 0);
}

TEST(adapter_mapping, DeepSeekIgnoresHeadDimAndHonoursMoeLayerFreq) {
  auto config = bundled_json("deepseek-ai/DeepSeek-V2-Lite");
  const auto base = Estimator(adapt(config), full_registry()).count_parameters();
  // Newer transformers-written configs carry head_dim = qk_rope_head_dim: no effect on MLA.
  config["head_dim"] = 64;
  EXPECT_EQ(Estimator(adapt(config), full_registry()).count_parameters().total, base.total);
  EXPECT_THAT(adapt(config).keys_read, Not(Contains("head_dim")));
  // HF modeling_deepseek: MoE iff i >= first_k_dense_replace and i % moe_layer_freq == 0.
  config["moe_layer_freq"] = 2;
  const auto pattern = moe_pattern(adapt(config));
  for (std::size_t i = 0; i < pattern.size(); ++i) EXPECT_EQ(pattern[i], i >= 1 && i % 2 == 0) << i;
  // n_routed_experts null: a dense DeepSeek model.
  config["n_routed_experts"] = nullptr;
  for (bool moe : moe_pattern(adapt(config))) EXPECT_FALSE(moe);
}

TEST(adapter_mapping, DeepSeekV3WithoutTopkMethodKeepsTheExpertBias) {
  auto config = bundled_json("deepseek-ai/DeepSeek-V3");
  config.erase("topk_method");
  EXPECT_TRUE(adapt(config).layers.back().mlp.router_expert_bias);  // V3 lineage default
  config["topk_method"] = "greedy";
  EXPECT_FALSE(adapt(config).layers.back().mlp.router_expert_bias);
}

}  // namespace
}  // namespace mme::test
