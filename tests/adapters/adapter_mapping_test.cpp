// What each adapter puts into the ModelSpec: layer patterns, attention shapes, MoE details,
// the keys it read and the warnings for keys it cannot honour.
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

std::vector<bool> moe_pattern(const ModelSpec& spec) {
  std::vector<bool> out;
  for (const auto& l : spec.layers) out.push_back(l.mlp.kind == "moe");
  return out;
}

bool any_warning_contains(const ModelSpec& spec, const std::string& text) {
  return std::any_of(spec.warnings.begin(), spec.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

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
      EXPECT_TRUE(l.mlp.router_expert_bias);                  // noaux_tc
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

TEST(adapter_mapping, Qwen2HasQkvBiasQwen3HasQkNormAndHeadDim) {
  const ModelSpec q2 = adapt(bundled_json("Qwen/Qwen2.5-7B"));
  EXPECT_TRUE(q2.layers[0].attention.qkv_bias);
  EXPECT_FALSE(q2.layers[0].attention.qk_norm);
  EXPECT_EQ(q2.layers[0].attention.kv_channels, 3584 / 28);
  EXPECT_EQ(q2.layers[0].attention.num_query_groups, 4);

  const ModelSpec q3 = adapt(bundled_json("Qwen/Qwen3-0.6B"));
  EXPECT_FALSE(q3.layers[0].attention.qkv_bias);
  EXPECT_TRUE(q3.layers[0].attention.qk_norm);
  EXPECT_EQ(q3.layers[0].attention.kv_channels, 128);  // head_dim, not 1024 / 16
  EXPECT_TRUE(q3.tie_embeddings);
}

TEST(adapter_mapping, Qwen2MoeSharedExpertGateAndSparseLayers) {
  auto config = bundled_json("Qwen/Qwen2-57B-A14B");
  ModelSpec s = adapt(config);
  for (const auto& l : s.layers) {
    EXPECT_EQ(l.mlp.kind, "moe");
    EXPECT_EQ(l.mlp.shared_expert_ffn_hidden_size, 20480);
    EXPECT_TRUE(l.mlp.shared_expert_gate);
    EXPECT_FALSE(l.mlp.router_expert_bias);
  }
  // HF semantics: sparse iff i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
  config["decoder_sparse_step"] = 2;
  config["mlp_only_layers"] = {1, 6};
  s = adapt(config);
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    const bool sparse = (i + 1) % 2 == 0 && i != 1;
    EXPECT_EQ(s.layers[i].mlp.kind, sparse ? "moe" : "dense") << i;
    if (!sparse) {
      EXPECT_EQ(s.layers[i].mlp.ffn_hidden_size, 18944) << i;  // intermediate_size
    }
  }
  config["shared_expert_intermediate_size"] = 0;
  EXPECT_FALSE(adapt(config).layers[3].mlp.shared_expert_gate);
}

TEST(adapter_mapping, Qwen3MoeHasNoSharedExpert) {
  const ModelSpec s = adapt(bundled_json("Qwen/Qwen3-30B-A3B"));
  for (const auto& l : s.layers) {
    EXPECT_EQ(l.mlp.kind, "moe");
    EXPECT_EQ(l.mlp.num_experts, 128);
    EXPECT_EQ(l.mlp.shared_expert_ffn_hidden_size, 0);
    EXPECT_TRUE(l.attention.qk_norm);
  }
}

TEST(adapter_mapping, MixtralIsAllMoeWithTheDenseWidthAsExpertWidth) {
  const ModelSpec s = adapt(bundled_json("mistralai/Mixtral-8x7B-v0.1"));
  for (const auto& l : s.layers) {
    EXPECT_EQ(l.mlp.kind, "moe");
    EXPECT_EQ(l.mlp.num_experts, 8);
    EXPECT_EQ(l.mlp.top_k, 2);
    EXPECT_EQ(l.mlp.expert_ffn_hidden_size, 14336);
    EXPECT_EQ(l.mlp.shared_expert_ffn_hidden_size, 0);
  }
  EXPECT_TRUE(s.gated_linear_unit);
  EXPECT_THAT(s.keys_read, Contains("num_local_experts"));
}

TEST(adapter_mapping, Gemma2FourNormsGeGluTiedHeadDimAndWarnings) {
  const ModelSpec s = adapt(bundled_json("google/gemma-2-9b-it"));
  EXPECT_TRUE(s.tie_embeddings);
  EXPECT_TRUE(s.gated_linear_unit);
  EXPECT_EQ(s.activation, "gelu_pytorch_tanh");  // hidden_activation
  EXPECT_EQ(s.layers[0].attention.kv_channels, 256);
  EXPECT_TRUE(s.layers[0].post_attention_norm);
  EXPECT_TRUE(s.layers[0].post_mlp_norm);
  EXPECT_TRUE(any_warning_contains(s, "sliding_window"));
  EXPECT_TRUE(any_warning_contains(s, "attn_logit_softcapping"));
  EXPECT_TRUE(any_warning_contains(s, "final_logit_softcapping"));
}

TEST(adapter_mapping, LlamaHasNoWarnings) {
  const ModelSpec s = adapt(bundled_json("meta-llama/Meta-Llama-3-8B"));
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
  EXPECT_EQ(s.normalization, Normalization::kRMSNorm);
  EXPECT_EQ(s.position_embedding, PositionEmbedding::kRope);
  EXPECT_EQ(s.layers[0].attention.num_query_groups, 8);
}

TEST(adapter_mapping, GenericRules) {
  nlohmann::json c = {{"model_type", "my_gpt"}, {"hidden_size", 1024},      {"num_hidden_layers", 4},
                      {"num_attention_heads", 16}, {"vocab_size", 50000}, {"intermediate_size", 4096},
                      {"layer_norm_eps", 1e-5},    {"hidden_act", "gelu_new"}};
  ModelSpec s = adapt(c);
  EXPECT_EQ(s.normalization, Normalization::kLayerNorm);  // no rms_norm_eps
  EXPECT_FALSE(s.gated_linear_unit);                        // gelu outside a GeGLU family
  EXPECT_EQ(s.layers[0].attention.num_query_groups, 16);    // num_key_value_heads defaults to heads
  EXPECT_EQ(s.layers[0].attention.kv_channels, 64);         // hidden / heads
  EXPECT_DOUBLE_EQ(s.hidden_dropout, 0.0);
  // An unknown family without the key: transformers omits tie_word_embeddings exactly when
  // it is true (PretrainedConfig's default), so tied, with a warning.
  EXPECT_TRUE(s.tie_embeddings);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_THAT(s.warnings[0], HasSubstr("tie_word_embeddings"));
  c["tie_word_embeddings"] = false;
  s = adapt(c);
  EXPECT_FALSE(s.tie_embeddings);
  EXPECT_TRUE(s.warnings.empty());

  c["hidden_act"] = "silu";
  c["num_key_value_heads"] = 4;
  c["attention_dropout"] = 0.1;
  c["tie_word_embeddings"] = true;
  s = adapt(c);
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_TRUE(s.gated_linear_unit);
  EXPECT_EQ(s.layers[0].attention.num_query_groups, 4);
  EXPECT_DOUBLE_EQ(s.attention_dropout, 0.1);
  EXPECT_TRUE(s.tie_embeddings);

  c["position_embedding_type"] = "absolute";
  c["max_position_embeddings"] = 2048;
  s = adapt(c);
  EXPECT_EQ(s.position_embedding, PositionEmbedding::kLearnedAbsolute);

  nlohmann::json bare = c;
  bare.erase("layer_norm_eps");
  EXPECT_TRUE(any_warning_contains(adapt(bare), "RMSNorm assumed"));
}

TEST(adapter_mapping, GenericKnowsTheTiedDefaultOfCommonFamilies) {
  auto llama = bundled_json("meta-llama/Meta-Llama-3-8B");
  llama.erase("tie_word_embeddings");
  EXPECT_FALSE(adapt(llama).tie_embeddings);  // LlamaConfig default
  EXPECT_TRUE(adapt(llama).warnings.empty());
  EXPECT_TRUE(adapt(bundled_json("google/gemma-2-9b-it")).tie_embeddings);  // GemmaConfig default
}

TEST(adapter_mapping, GenericWarnsAboutAnUnknownExpertsKey) {
  auto config = bundled_json("meta-llama/Meta-Llama-3-8B");
  config["moe_num_experts"] = 16;
  const ModelSpec s = adapt(config);
  EXPECT_TRUE(any_warning_contains(s, "moe_num_experts"));
  for (const auto& l : s.layers) EXPECT_EQ(l.mlp.kind, "dense");
}

TEST(adapter_mapping, GenericHonoursTheSparseLayerKeys) {
  auto config = bundled_json("mistralai/Mixtral-8x7B-v0.1");
  config["first_k_dense_replace"] = 2;
  config["mlp_only_layers"] = {5};
  const auto pattern = moe_pattern(adapt(config));
  for (std::size_t i = 0; i < pattern.size(); ++i) EXPECT_EQ(pattern[i], i >= 2 && i != 5) << i;
}

}  // namespace
}  // namespace mme::test
