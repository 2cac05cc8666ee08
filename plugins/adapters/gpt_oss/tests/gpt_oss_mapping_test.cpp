// What the gpt_oss adapter puts into the ModelSpec for GPT-OSS: the alternating sliding-window and
// full attention layers, the learnable softmax (attention sinks), the clamped quick-GEGLU experts
// with biases, and the keys it refuses. Configs are adapted as the CLI does (best adapter of the
// full registry, tests/support/adapters). The exact parameter count is in
// tests/data/expected_params.csv, checked with every bundled model.
#include <gtest/gtest.h>

#include <mme/sdk/error.hpp>

#include "test_registry.hpp"

namespace mme::test {
namespace {

TEST(adapter_mapping, GptOssAlternatesSlidingAndFullAttentionWithSinks) {
  const ModelSpec s = adapt(bundled_json("openai/gpt-oss-120b"));
  EXPECT_EQ(s.adapter, "gpt_oss");
  ASSERT_EQ(s.num_layers, 36);
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    const auto& a = s.layers[i].attention;
    // layer_types starts with a sliding layer; sliding_window 128 tokens including the query's own
    // = 127 earlier ones (Megatron-LM's window_size[0]).
    EXPECT_EQ(a.window, i % 2 == 0 ? 127 : 0) << i;
    EXPECT_EQ(a.softmax_type, SoftmaxType::kLearnable) << i;
    EXPECT_EQ(a.num_heads, 64);
    EXPECT_EQ(a.num_query_groups, 8);
    EXPECT_EQ(a.kv_channels, 64);  // head_dim, not 2880 / 64
    EXPECT_TRUE(a.qkv_bias);
    const auto& f = s.layers[i].mlp;
    EXPECT_EQ(f.kind, "moe");
    EXPECT_EQ(f.num_experts, 128);
    EXPECT_EQ(f.top_k, 4);
    EXPECT_EQ(f.expert_ffn_hidden_size, 2880);
    EXPECT_EQ(f.shared_expert_ffn_hidden_size, 0);
  }
  EXPECT_EQ(s.activation, "quick_gelu");
  EXPECT_TRUE(s.gated_linear_unit);
  EXPECT_DOUBLE_EQ(s.glu_linear_offset, 1.0);
  EXPECT_DOUBLE_EQ(s.activation_clamp_value, 7.0);  // swiglu_limit
  EXPECT_TRUE(s.add_bias_linear);
  EXPECT_FALSE(s.tie_embeddings);
  EXPECT_EQ(s.vocab_size, 201088);
  // YaRN's factor (its concentration factor sends Megatron-LM to the unfused RoPE).
  EXPECT_DOUBLE_EQ(s.rope_yarn_factor, 32);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(adapter_mapping, GptOssLayerTypesDecideTheWindows) {
  auto config = bundled_json("openai/gpt-oss-120b");
  // Without layer_types GptOssConfig alternates, sliding first.
  config.erase("layer_types");
  config["sliding_window"] = 64;
  ModelSpec s = adapt(config);
  EXPECT_EQ(s.layers[0].attention.window, 63);
  EXPECT_EQ(s.layers[1].attention.window, 0);
  EXPECT_EQ(s.layers[34].attention.window, 63);
  // An explicit list wins.
  config["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 36; ++i) config["layer_types"].push_back(i < 30 ? "full_attention" : "sliding_attention");
  s = adapt(config);
  EXPECT_EQ(s.layers[0].attention.window, 0);
  EXPECT_EQ(s.layers[30].attention.window, 63);
}

TEST(adapter_mapping, GptOssRefusesWhatItCannotModel) {
  const auto base = bundled_json("openai/gpt-oss-120b");
  auto expect_error = [](const nlohmann::json& c, const std::string& what) {
    try {
      adapt(c);
      ADD_FAILURE() << "no error for " << what;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  auto c = base;
  c["layer_types"].erase(c["layer_types"].begin());
  expect_error(c, "lists 35 layer types for 36 layers");
  c = base;
  c["layer_types"][3] = "chunked_attention";
  expect_error(c, "entry 3 is \"chunked_attention\"");
  c = base;
  c["experts_per_token"] = 2;
  expect_error(c, "must equal num_experts_per_tok (4)");
  c = base;
  c["attention_bias"] = false;
  expect_error(c, "attention_bias");
  c = base;
  c["swiglu_limit"] = 0;
  expect_error(c, "swiglu_limit");
  c = base;
  c["rope_scaling"]["mscale"] = 0.707;
  expect_error(c, "'mscale' is not modelled");
}

}  // namespace
}  // namespace mme::test
