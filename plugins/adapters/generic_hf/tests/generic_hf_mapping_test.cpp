// What the generic_hf adapter puts into the ModelSpec: the generic Hugging Face adapter (Llama, Mixtral, Gemma-2 and
// the generic rules), the keys it read and the warnings for keys it cannot honour. Configs are adapted as the CLI does
// (best adapter of the full registry, tests/support/adapters).
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
  nlohmann::json c = {{"model_type", "my_gpt"},    {"hidden_size", 1024},     {"num_hidden_layers", 4},
                      {"num_attention_heads", 16}, {"vocab_size", 50000},     {"intermediate_size", 4096},
                      {"layer_norm_eps", 1e-5},    {"hidden_act", "gelu_new"}};
  ModelSpec s = adapt(c);
  EXPECT_EQ(s.normalization, Normalization::kLayerNorm);  // no rms_norm_eps
  EXPECT_FALSE(s.gated_linear_unit);                      // gelu outside a GeGLU family
  EXPECT_EQ(s.layers[0].attention.num_query_groups, 16);  // num_key_value_heads defaults to heads
  EXPECT_EQ(s.layers[0].attention.kv_channels, 64);       // hidden / heads
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
